package retryafter

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
)

func TestPolicyWithDefaults(t *testing.T) {
	t.Parallel()

	p := Policy{}.WithDefaults()
	if p.BaseBackoff != BaseBackoffDefault || p.MaxBackoff != MaxBackoffDefault || p.MaxDelay != MaxDelayDefault {
		t.Errorf("zero Policy WithDefaults = %+v", p)
	}
	// The design's defaults: 1s doubling to a cap of 64s, clamp at 1h.
	if p.BaseBackoff != time.Second || p.MaxBackoff != 64*time.Second || p.MaxDelay != time.Hour {
		t.Errorf("defaults base %s, cap %s, clamp %s; want 1s, 64s, 1h", p.BaseBackoff, p.MaxBackoff, p.MaxDelay)
	}
	if p.Clock == nil || p.Rand == nil {
		t.Errorf("WithDefaults left Clock %v or Rand %v nil", p.Clock, p.Rand)
	}
	if _, ok := p.Clock.(clock.System); !ok {
		t.Errorf("default clock is %T, want clock.System", p.Clock)
	}
	// The system clock keeps time.Now's zone; the policy reads it in UTC.
	if d := p.Decide("", false, 0); d.NotBefore.Location() != time.UTC {
		t.Errorf("NotBefore with the default clock in %v, want UTC", d.NotBefore.Location())
	}

	c, r := clock.NewStub(testNow), lowestRand()
	set := Policy{BaseBackoff: 2 * time.Second, MaxBackoff: time.Minute, MaxDelay: 2 * time.Hour, Clock: c, Rand: r}
	if got := set.WithDefaults(); got != set {
		t.Errorf("WithDefaults changed set fields: %+v, want %+v", got, set)
	}
	if got := (Policy{BaseBackoff: -1}).WithDefaults(); got.BaseBackoff != -1 {
		t.Errorf("WithDefaults replaced a negative BaseBackoff with %v; Validate must see it", got.BaseBackoff)
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		policy  Policy
		wantErr string // "" for valid
	}{
		{"zero policy", Policy{}, ""},
		{"all equal", Policy{BaseBackoff: time.Minute, MaxBackoff: time.Minute, MaxDelay: time.Minute}, ""},
		{"negative BaseBackoff", Policy{BaseBackoff: -time.Second}, "BaseBackoff: -1s must not be negative"},
		{"negative MaxBackoff", Policy{MaxBackoff: -time.Second}, "MaxBackoff: -1s must not be negative"},
		{"negative MaxDelay", Policy{MaxDelay: -time.Second}, "MaxDelay: -1s must not be negative"},
		{"MaxBackoff below BaseBackoff", Policy{BaseBackoff: 2 * time.Second, MaxBackoff: time.Second}, "MaxBackoff: 1s must be >= BaseBackoff (2s)"},
		{"BaseBackoff above default MaxBackoff", Policy{BaseBackoff: 10 * time.Minute}, "MaxBackoff: 1m4s must be >= BaseBackoff (10m0s)"},
		{"MaxDelay below MaxBackoff", Policy{MaxDelay: time.Minute}, "MaxDelay: 1m0s must be >= MaxBackoff (1m4s)"},
		{"MaxBackoff above default MaxDelay", Policy{MaxBackoff: 2 * time.Hour}, "MaxDelay: 1h0m0s must be >= MaxBackoff (2h0m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecidePanicsOnInvalidPolicy(t *testing.T) {
	t.Parallel()
	for name, call := range map[string]func(Policy){
		"Decide":      func(p Policy) { p.Decide("5", true, 0) },
		"DecideDelay": func(p Policy) { p.DecideDelay(time.Second, "5", 0) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "MaxDelay: -1s must not be negative") {
					t.Errorf("%s on an invalid Policy: recovered %v, want a panic naming MaxDelay", name, r)
				}
			}()
			call(Policy{MaxDelay: -time.Second, Clock: clock.NewStub(testNow)})
		}()
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()

	const maxDelay = time.Hour
	half := testNow.Add(500 * time.Millisecond)
	type want struct {
		source    Source
		delay     time.Duration
		requested time.Duration
		clamped   bool
		form      Form
		fallback  Fallback
	}
	tests := []struct {
		name    string
		now     time.Time
		header  string
		present bool
		attempt int
		want    want
	}{
		{"missing", testNow, "", false, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackMissing}},
		{"missing ignores header text", testNow, "120", false, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackMissing}},
		{"missing sized by attempt", testNow, "", false, 3, want{source: SourceBackoff, delay: 8*time.Second - 1, requested: 8*time.Second - 1, fallback: FallbackMissing}},
		{"missing at cap", testNow, "", false, 1000, want{source: SourceBackoff, delay: MaxBackoffDefault - 1, requested: MaxBackoffDefault - 1, fallback: FallbackMissing}},
		{"empty", testNow, "", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackEmpty}},
		{"blank", testNow, " \t ", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackEmpty}},
		{"negative", testNow, "-5", true, 1, want{source: SourceBackoff, delay: 2*time.Second - 1, requested: 2*time.Second - 1, fallback: FallbackNegative}},
		{"fractional", testNow, "1.5", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackFractional}},
		{"non-numeric", testNow, "soon", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackNonNumeric}},
		{"plus sign", testNow, "+5", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackNonNumeric}},
		{"date not in GMT", testNow, "Sun, 01 Mar 2026 12:02:00 UTC", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, fallback: FallbackNonNumeric}},

		{"zero seconds", testNow, "0", true, 4, want{source: SourceRetryAfter, form: FormDelaySeconds}},
		{"seconds", testNow, "120", true, 0, want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormDelaySeconds}},
		{"seconds with whitespace", testNow, " 120 ", true, 0, want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormDelaySeconds}},
		{"exactly MaxDelay", testNow, "3600", true, 0, want{source: SourceRetryAfter, delay: maxDelay, requested: maxDelay, form: FormDelaySeconds}},
		{"just over MaxDelay", testNow, "3601", true, 0, want{source: SourceRetryAfter, delay: maxDelay, requested: 3601 * time.Second, clamped: true, form: FormDelaySeconds}},
		{"overflowing seconds", testNow, strings.Repeat("9", 30), true, 0, want{source: SourceRetryAfter, delay: maxDelay, requested: math.MaxInt64, clamped: true, form: FormDelaySeconds}},

		{"future imf-fixdate", testNow, "Sun, 01 Mar 2026 12:02:00 GMT", true, 0, want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormIMFFixdate}},
		{"future rfc850", testNow, "Sunday, 01-Mar-26 12:02:00 GMT", true, 0, want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormRFC850}},
		{"future asctime", testNow, "Sun Mar  1 12:02:00 2026", true, 0, want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormASCTime}},
		{"date under a second ahead", half, "Sun, 01 Mar 2026 12:00:01 GMT", true, 0, want{source: SourceRetryAfter, delay: 500 * time.Millisecond, requested: 500 * time.Millisecond, form: FormIMFFixdate}},
		{"date far ahead clamped", testNow, "Mon, 02 Mar 2026 12:00:00 GMT", true, 0, want{source: SourceRetryAfter, delay: maxDelay, requested: 24 * time.Hour, clamped: true, form: FormIMFFixdate}},
		{"date beyond a Duration clamped", testNow, "Fri, 31 Dec 9999 23:59:59 GMT", true, 0, want{source: SourceRetryAfter, delay: maxDelay, requested: math.MaxInt64, clamped: true, form: FormIMFFixdate}},

		{"date equal to now", testNow, "Sun, 01 Mar 2026 12:00:00 GMT", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, form: FormIMFFixdate, fallback: FallbackPastDate}},
		{"date in the past", testNow, "Sun, 06 Nov 1994 08:49:37 GMT", true, 2, want{source: SourceBackoff, delay: 4*time.Second - 1, requested: 4*time.Second - 1, form: FormIMFFixdate, fallback: FallbackPastDate}},
		{"date just past, now has a fraction", half, "Sun Mar  1 12:00:00 2026", true, 0, want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, form: FormASCTime, fallback: FallbackPastDate}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := highestRand()
			p := Policy{Clock: clock.NewStub(tt.now), Rand: r}
			d := p.Decide(tt.header, tt.present, tt.attempt)
			got := want{source: d.Source, delay: d.Delay, requested: d.Requested, clamped: d.Clamped, form: d.Form, fallback: d.Fallback}
			if got != tt.want {
				t.Errorf("Decide(%q, %v, %d) = %+v,\nwant %+v", tt.header, tt.present, tt.attempt, got, tt.want)
			}
			if !d.NotBefore.Equal(tt.now.Add(tt.want.delay)) || d.NotBefore.Location() != time.UTC {
				t.Errorf("NotBefore = %v, want %v in UTC", d.NotBefore, tt.now.Add(tt.want.delay))
			}
			if d.Present != tt.present || d.Attempt != tt.attempt {
				t.Errorf("Present, Attempt = %v, %d; want %v, %d", d.Present, d.Attempt, tt.present, tt.attempt)
			}
			wantRaw := ""
			if tt.present {
				wantRaw = tt.header
			}
			if d.Raw != wantRaw {
				t.Errorf("Raw = %q, want %q", d.Raw, wantRaw)
			}
			if usedRand := len(r.calls) > 0; usedRand != (d.Source == SourceBackoff) {
				t.Errorf("Rand calls %v with source %s: Rand must be used exactly for backoff", r.calls, d.Source)
			}
		})
	}
}

func TestDecideNonUTCClock(t *testing.T) {
	t.Parallel()
	est := time.FixedZone("EST", -5*3600)
	p := Policy{Clock: clock.NewStub(testNow.In(est)), Rand: lowestRand()}
	d := p.Decide("Sun, 01 Mar 2026 12:02:00 GMT", true, 0)
	if d.Delay != 2*time.Minute || d.NotBefore.Location() != time.UTC || !d.NotBefore.Equal(testNow.Add(2*time.Minute)) {
		t.Errorf("Decide with an EST clock = %v", d)
	}
}

func TestDecideDelay(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		d         time.Duration
		raw       string
		attempt   int
		source    Source
		delay     time.Duration
		requested time.Duration
		clamped   bool
		fallback  Fallback
	}{
		{"zero", 0, "0", 0, SourceVendorDelay, 0, 0, false, FallbackNone},
		{"milliseconds", 1500 * time.Millisecond, "1500", 0, SourceVendorDelay, 1500 * time.Millisecond, 1500 * time.Millisecond, false, FallbackNone},
		{"exactly MaxDelay", time.Hour, "3600", 0, SourceVendorDelay, time.Hour, time.Hour, false, FallbackNone},
		{"over MaxDelay", time.Hour + 1, "3600.000000001", 0, SourceVendorDelay, time.Hour, time.Hour + 1, true, FallbackNone},
		{"max duration", math.MaxInt64, "huge", 0, SourceVendorDelay, time.Hour, math.MaxInt64, true, FallbackNone},
		{"negative", -time.Second, "-1", 2, SourceBackoff, 2 * time.Second, 2 * time.Second, false, FallbackNegative},
		{"min duration", math.MinInt64, "-huge", 0, SourceBackoff, 500 * time.Millisecond, 500 * time.Millisecond, false, FallbackNegative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{Clock: clock.NewStub(testNow), Rand: middleRand()}
			d := p.DecideDelay(tt.d, tt.raw, tt.attempt)
			if d.Source != tt.source || d.Delay != tt.delay || d.Requested != tt.requested || d.Clamped != tt.clamped || d.Fallback != tt.fallback {
				t.Errorf("DecideDelay(%v) = %v", tt.d, d)
			}
			if !d.Present || d.Raw != tt.raw || d.Form != "" || !d.NotBefore.Equal(testNow.Add(tt.delay)) {
				t.Errorf("DecideDelay(%v) = %+v: want Present, Raw %q, no Form, NotBefore now+Delay", tt.d, d, tt.raw)
			}
		})
	}
}

// TestFallbackForEveryReason keeps the Reason and Fallback vocabularies in
// step: every parse failure has a fallback of the same name.
func TestFallbackForEveryReason(t *testing.T) {
	t.Parallel()
	for reason, want := range map[Reason]Fallback{
		ReasonEmpty:      FallbackEmpty,
		ReasonNegative:   FallbackNegative,
		ReasonFractional: FallbackFractional,
		ReasonNonNumeric: FallbackNonNumeric,
	} {
		if got := fallbackFor(reason); got != want {
			t.Errorf("fallbackFor(%s) = %q, want %q", reason, got, want)
		}
	}
}

// TestDecideFor: an HTTP-date is measured against the response's Date when
// it is a valid HTTP-date, and against the host's clock otherwise; NotBefore
// is always the host's now plus Delay.
func TestDecideFor(t *testing.T) {
	t.Parallel()

	const imfDate = "Sun, 01 Mar 2026 12:00:00 GMT" // testNow on the vendor's clock
	fast, slow := testNow.Add(5*time.Second), testNow.Add(-5*time.Second)
	type want struct {
		source    Source
		delay     time.Duration
		requested time.Duration
		clamped   bool
		form      Form
		fallback  Fallback
		ref       Reference
	}
	backoff := want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1}
	tests := []struct {
		name    string
		now     time.Time // the host's clock
		header  string
		present bool
		date    string
		want    want
	}{
		{"date header, host fast", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, imfDate,
			want{source: SourceRetryAfter, delay: 7 * time.Second, requested: 7 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header, host slow", slow, "Sun, 01 Mar 2026 12:00:07 GMT", true, imfDate,
			want{source: SourceRetryAfter, delay: 7 * time.Second, requested: 7 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header, host has a fraction", testNow.Add(500 * time.Millisecond), "Sun, 01 Mar 2026 12:00:01 GMT", true, imfDate,
			want{source: SourceRetryAfter, delay: time.Second, requested: time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"rfc850 retry-after, imf date", fast, "Sunday, 01-Mar-26 12:02:00 GMT", true, imfDate,
			want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormRFC850, ref: ReferenceDateHeader}},
		{"asctime retry-after, imf date", fast, "Sun Mar  1 12:02:00 2026", true, imfDate,
			want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormASCTime, ref: ReferenceDateHeader}},
		{"rfc850 date header", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "Sunday, 01-Mar-26 12:00:00 GMT",
			want{source: SourceRetryAfter, delay: 7 * time.Second, requested: 7 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"asctime date header", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "Sun Mar  1 12:00:00 2026",
			want{source: SourceRetryAfter, delay: 7 * time.Second, requested: 7 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header with whitespace", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, " \t" + imfDate + " ",
			want{source: SourceRetryAfter, delay: 7 * time.Second, requested: 7 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header with a leap second", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "Sun, 01 Mar 2026 11:59:60 GMT",
			want{source: SourceRetryAfter, delay: 7 * time.Second, requested: 7 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"vendor clock far off, still relative", testNow, "Sun, 06 Nov 1994 08:49:47 GMT", true, "Sun, 06 Nov 1994 08:49:37 GMT",
			want{source: SourceRetryAfter, delay: 10 * time.Second, requested: 10 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header, clamped", testNow, "Sun, 01 Mar 2026 14:00:00 GMT", true, imfDate,
			want{source: SourceRetryAfter, delay: time.Hour, requested: 2 * time.Hour, clamped: true, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header, past on the host's clock but future on the vendor's", fast, "Sun, 01 Mar 2026 12:00:03 GMT", true, imfDate,
			want{source: SourceRetryAfter, delay: 3 * time.Second, requested: 3 * time.Second, form: FormIMFFixdate, ref: ReferenceDateHeader}},
		{"date header, future on the host's clock but equal to Date", slow, imfDate, true, imfDate,
			want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, form: FormIMFFixdate, fallback: FallbackPastDate, ref: ReferenceDateHeader}},
		{"date header, before Date", slow, "Sun, 01 Mar 2026 11:59:58 GMT", true, imfDate,
			want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, form: FormIMFFixdate, fallback: FallbackPastDate, ref: ReferenceDateHeader}},

		{"no date header: host clock", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "",
			want{source: SourceRetryAfter, delay: 2 * time.Second, requested: 2 * time.Second, form: FormIMFFixdate, ref: ReferenceHostClock}},
		{"blank date header: host clock", slow, "Sun, 01 Mar 2026 12:00:07 GMT", true, " \t",
			want{source: SourceRetryAfter, delay: 12 * time.Second, requested: 12 * time.Second, form: FormIMFFixdate, ref: ReferenceHostClock}},
		{"malformed date header: host clock", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "yesterday",
			want{source: SourceRetryAfter, delay: 2 * time.Second, requested: 2 * time.Second, form: FormIMFFixdate, ref: ReferenceHostClock}},
		{"date header not in GMT: host clock", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "Sun, 01 Mar 2026 12:00:00 UTC",
			want{source: SourceRetryAfter, delay: 2 * time.Second, requested: 2 * time.Second, form: FormIMFFixdate, ref: ReferenceHostClock}},
		{"numeric date header: host clock", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "1772366400",
			want{source: SourceRetryAfter, delay: 2 * time.Second, requested: 2 * time.Second, form: FormIMFFixdate, ref: ReferenceHostClock}},
		{"impossible date header: host clock", fast, "Sun, 01 Mar 2026 12:00:07 GMT", true, "Sun, 30 Feb 2026 12:00:00 GMT",
			want{source: SourceRetryAfter, delay: 2 * time.Second, requested: 2 * time.Second, form: FormIMFFixdate, ref: ReferenceHostClock}},
		{"no date header, past on the host's clock", fast, "Sun, 01 Mar 2026 12:00:03 GMT", true, "",
			want{source: SourceBackoff, delay: time.Second - 1, requested: time.Second - 1, form: FormIMFFixdate, fallback: FallbackPastDate, ref: ReferenceHostClock}},

		{"delay-seconds ignore the date header", fast, "120", true, "Sun, 01 Mar 2026 13:00:00 GMT",
			want{source: SourceRetryAfter, delay: 2 * time.Minute, requested: 2 * time.Minute, form: FormDelaySeconds}},
		{"missing retry-after with a date header", fast, "", false, imfDate,
			func() want { w := backoff; w.fallback = FallbackMissing; return w }()},
		{"malformed retry-after with a date header", fast, "soon", true, imfDate,
			func() want { w := backoff; w.fallback = FallbackNonNumeric; return w }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{Clock: clock.NewStub(tt.now), Rand: highestRand()}
			d := p.DecideFor(tt.header, tt.present, tt.date, 0)
			got := want{source: d.Source, delay: d.Delay, requested: d.Requested, clamped: d.Clamped, form: d.Form, fallback: d.Fallback, ref: d.DateReference}
			if got != tt.want {
				t.Errorf("DecideFor(%q, %v, %q, 0) = %+v,\nwant %+v", tt.header, tt.present, tt.date, got, tt.want)
			}
			if !d.NotBefore.Equal(tt.now.Add(tt.want.delay)) || d.NotBefore.Location() != time.UTC {
				t.Errorf("NotBefore = %v, want the host's now + Delay %v in UTC", d.NotBefore, tt.now.Add(tt.want.delay))
			}
		})
	}
}

// TestDecideIsDecideForWithoutDate: Decide measures a date against the
// host's clock and says so.
func TestDecideIsDecideForWithoutDate(t *testing.T) {
	t.Parallel()
	for _, header := range []string{"120", "Sun, 01 Mar 2026 12:02:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "soon", ""} {
		p := Policy{Clock: clock.NewStub(testNow), Rand: middleRand()}
		got, want := p.Decide(header, true, 1), p.DecideFor(header, true, "", 1)
		if got != want {
			t.Errorf("Decide(%q) = %v, DecideFor without a Date = %v", header, got, want)
		}
		if got.Form.IsDate() != (got.DateReference == ReferenceHostClock) || !got.Form.IsDate() && got.DateReference != "" {
			t.Errorf("Decide(%q): form %q with DateReference %q", header, got.Form, got.DateReference)
		}
	}
}
