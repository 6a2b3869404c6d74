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
		{"negative BaseBackoff", Policy{BaseBackoff: -time.Second}, "BaseBackoff (-1s) must not be negative"},
		{"negative MaxBackoff", Policy{MaxBackoff: -time.Second}, "MaxBackoff (-1s) must not be negative"},
		{"negative MaxDelay", Policy{MaxDelay: -time.Second}, "MaxDelay (-1s) must not be negative"},
		{"MaxBackoff below BaseBackoff", Policy{BaseBackoff: 2 * time.Second, MaxBackoff: time.Second}, "MaxBackoff (1s) must be >= BaseBackoff (2s)"},
		{"BaseBackoff above default MaxBackoff", Policy{BaseBackoff: 10 * time.Minute}, "MaxBackoff (5m0s) must be >= BaseBackoff (10m0s)"},
		{"MaxDelay below MaxBackoff", Policy{MaxDelay: time.Minute}, "MaxDelay (1m0s) must be >= MaxBackoff (5m0s)"},
		{"MaxBackoff above default MaxDelay", Policy{MaxBackoff: 2 * time.Hour}, "MaxDelay (1h0m0s) must be >= MaxBackoff (2h0m0s)"},
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
				if r := recover(); r == nil || !strings.Contains(r.(string), "MaxDelay (-1s) must not be negative") {
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
		{"missing at cap", testNow, "", false, 1000, want{source: SourceBackoff, delay: 5*time.Minute - 1, requested: 5*time.Minute - 1, fallback: FallbackMissing}},
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
