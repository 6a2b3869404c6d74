package sttsim

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// TestDateFromClock: every answer's Date is Config.Clock's now, not the
// real clock's, so that a client measuring an HTTP-date Retry-After
// against it waits what the simulator meant, whatever its own clock says.
func TestDateFromClock(t *testing.T) {
	t.Parallel()
	wantDate := epoch.Truncate(time.Second).Format(http.TimeFormat) // "Sun, 01 Mar 2026 09:30:00 GMT"
	for _, form := range []RetryAfterForm{FormIMFFixdate, FormRFC850, FormASCTime} {
		src := newScriptedSource()
		b := setup(t, Config{RetryAfterForm: form, RateLimitShare: 0.5, Cooldown: 90 * time.Second, Rand: rand.New(src)})
		src.Push(yes)
		resp, data := b.submit("k", remoteBody(1))
		wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
		if got := resp.Header.Get("Date"); got != wantDate {
			t.Fatalf("%s: Date %q, want %q", form, got, wantDate)
		}
		// Retry-After is epoch+90s rounded up (09:31:31), Date epoch
		// rounded down: 91 s on any client clock.
		for _, skew := range []time.Duration{-5 * time.Second, 0, 5 * time.Second} {
			p := retryafter.Policy{Clock: clock.NewStub(epoch.Add(skew))}
			d := p.DecideFor(resp.Header.Get("Retry-After"), true, resp.Header.Get("Date"), 0)
			if d.Delay != 91*time.Second || d.DateReference != retryafter.ReferenceDateHeader {
				t.Errorf("%s, client clock %v off: %v", form, skew, d)
			}
		}
	}

	// Other answers too: a 401, a 404, a 200, after the clock moved.
	b := setup(t, Config{})
	b.clock.Advance(time.Hour)
	wantDate = epoch.Add(time.Hour).Truncate(time.Second).Format(http.TimeFormat)
	for _, c := range []struct {
		name string
		do   func() (answer, []byte)
		want int
	}{
		{"401", func() (answer, []byte) { return b.submit("k", remoteBody(1), bearer("nope")) }, http.StatusUnauthorized},
		{"404", func() (answer, []byte) { return b.do(http.MethodGet, "/v2/nothing", nil) }, http.StatusNotFound},
		{"200", func() (answer, []byte) { return b.submit("k", remoteBody(1)) }, http.StatusOK},
	} {
		resp, data := c.do()
		wantStatus(t, resp, data, c.want)
		if got := resp.Header.Values("Date"); len(got) != 1 || got[0] != wantDate {
			t.Errorf("%s: Date %q, want %q", c.name, got, wantDate)
		}
	}
}
