package retryafter

import (
	"math"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// FuzzParse checks, for any input and any now the model supports, that
// Parse returns an error XOR a value, keeps its invariants, agrees with the
// reference model, and that DecideFor on the same input, with any response
// Date, keeps its own and measures a date against the Date exactly when the
// model reads the Date as an HTTP-date.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"0", "120", " 120\t", "0000120", "9223372036", "9223372037", "99999999999999999999999999",
		"", "   ", "-1", "-0", "-1.5", "1.5", "1.", ".5", "+5", "5s", "0x10", "1e3", "soon",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Nov 1994 08:49:37 GMT",
		"Sun, 01 Mar 2026 12:01:60 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sunday, 01-Mar-76 12:00:01 GMT", "Tuesday, 29-Feb-00 00:00:00 GMT",
		"Sun Nov  6 08:49:37 1994", "Sun Nov 06 08:49:37 1994", "Sun Nov 6 08:49:37 1994",
	} {
		f.Add(seed, testNow.Unix(), int64(0), "")
	}
	f.Add("Sunday, 01-Mar-76 12:00:00 GMT", testNow.Unix(), int64(999_999_999), "")
	for _, date := range []string{
		"Sun, 01 Mar 2026 11:59:55 GMT", "Sunday, 01-Mar-26 12:00:05 GMT", "Sun Mar  1 12:00:05 2026",
		" Sun, 01 Mar 2026 11:59:60 GMT\t", "Sun, 01 Mar 2026 12:00:00 UTC", "yesterday", "1772366400",
	} {
		f.Add("Sun, 01 Mar 2026 12:00:07 GMT", testNow.Unix(), int64(0), date)
	}

	lo, hi := minModelNow.Unix(), maxModelNow.Unix()
	f.Fuzz(func(t *testing.T, raw string, nowSec, nowNsec int64, date string) {
		// Fold any now into the range the model supports.
		if nowSec < lo || nowSec > hi {
			nowSec = lo + int64(uint64(nowSec)%uint64(hi-lo+1))
		}
		now := time.Unix(nowSec, int64(uint64(nowNsec)%1e9)).UTC()

		v, err := Parse(raw, now)
		checkParseInvariants(t, raw, now, v, err)
		if got, want := resultOf(v, err), modelParse(raw, now); !got.equal(want) {
			t.Fatalf("Parse(%q, %s) = %v, model says %v", raw, now.Format(time.RFC3339Nano), got, want)
		}

		p := Policy{Clock: clock.NewStub(now), Rand: highestRand()}.WithDefaults()
		attempt := int(nowNsec % 100)
		d := p.DecideFor(raw, true, date, attempt)
		if d.NotBefore.Before(now) || !d.NotBefore.Equal(now.Add(d.Delay)) || d.Delay < 0 || d.Delay > p.MaxDelay || d.Clamped != (d.Requested > p.MaxDelay) {
			t.Fatalf("DecideFor(%q, Date %q) = %v breaks an invariant", raw, date, d)
		}
		if m := modelParse(date, now); m.reason == "" && m.form.IsDate() {
			if d.Form.IsDate() && d.DateReference != ReferenceDateHeader {
				t.Fatalf("DecideFor(%q, Date %q) = %v, want it measured against the Date", raw, date, d)
			}
			inModel := !m.date.Before(minModelNow) && !m.date.After(maxModelNow)
			if mv := modelParse(raw, m.date); inModel && d.Source == SourceRetryAfter && mv.form.IsDate() && d.Requested != mv.delay {
				t.Fatalf("DecideFor(%q, Date %q) requested %v, model says %v", raw, date, d.Requested, mv.delay)
			}
		} else if plain := p.Decide(raw, true, attempt); plain != d {
			t.Fatalf("DecideFor(%q) with an unusable Date %q = %v, Decide = %v", raw, date, d, plain)
		}
		if v.Overflow && v.Form == FormDelaySeconds && v.Delay != math.MaxInt64 {
			t.Fatalf("overflowing seconds with Delay %v", v.Delay)
		}
	})
}
