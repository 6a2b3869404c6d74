package ledger_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// TestThrottlePolicyDateHeader: an HTTP-date Retry-After 7 s after the
// vendor's Date asks for 7 s whether the worker's clock runs 5 s fast or
// 5 s slow; the scope's deadline is the worker's now plus those 7 s.
// Without a Date the worker's clock is the reference (2 s fast, 12 s slow),
// and an unparsable Date is as good as none.
func TestThrottlePolicyDateHeader(t *testing.T) {
	t.Parallel()
	vendorNow := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := vendorNow.Format(http.TimeFormat)                            // "Sun, 01 Mar 2026 12:00:00 GMT"
	retryAfter := vendorNow.Add(7 * time.Second).Format(http.TimeFormat) // "Sun, 01 Mar 2026 12:00:07 GMT"

	cases := []struct {
		name    string
		skew    time.Duration // of the worker's clock against the vendor's
		date    *string
		wantDly time.Duration
		wantRef retryafter.Reference
	}{
		{"date header, worker 5s fast", 5 * time.Second, &date, 7 * time.Second, retryafter.ReferenceDateHeader},
		{"date header, worker 5s slow", -5 * time.Second, &date, 7 * time.Second, retryafter.ReferenceDateHeader},
		{"no date header, worker 5s fast", 5 * time.Second, nil, 2 * time.Second, retryafter.ReferenceHostClock},
		{"no date header, worker 5s slow", -5 * time.Second, nil, 12 * time.Second, retryafter.ReferenceHostClock},
		{"unparsable date header, worker 5s fast", 5 * time.Second, strp("yesterday"), 2 * time.Second, retryafter.ReferenceHostClock},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hostNow := vendorNow.Add(tc.skew)
			p := ledger.ThrottlePolicy{RetryAfter: retryafter.Policy{Clock: clock.NewStub(hostNow), Rand: highest}}
			got := p.Decide(ledger.ThrottleSignal{Scope: "s", Class: "rate_limited", RetryAfter: &retryAfter, Date: tc.date})
			d := got.Decision
			if d.Delay != tc.wantDly || d.Source != retryafter.SourceRetryAfter || d.Form != retryafter.FormIMFFixdate || d.DateReference != tc.wantRef {
				t.Errorf("Decision = %v (reference %q), want delay %v against %s", d, d.DateReference, tc.wantDly, tc.wantRef)
			}
			if want := hostNow.Add(tc.wantDly); !d.NotBefore.Equal(want) || !got.Extension.NotBefore.Equal(want) {
				t.Errorf("NotBefore %v, extension %v; want the worker's now + delay %v", d.NotBefore, got.Extension.NotBefore, want)
			}
			if e := got.Extension; e.RetryAfter == nil || *e.RetryAfter != retryAfter || e.Source != "retry-after" {
				t.Errorf("extension records %+v", e)
			}
		})
	}

	// A date that is not after the vendor's Date is a past date, even when
	// it is in the future on a slow worker's clock.
	p := ledger.ThrottlePolicy{RetryAfter: retryafter.Policy{Clock: clock.NewStub(vendorNow.Add(-5 * time.Second)), Rand: highest}}
	d := p.Decide(ledger.ThrottleSignal{Scope: "s", RetryAfter: &date, Date: &date}).Decision
	if d.Fallback != retryafter.FallbackPastDate || d.DateReference != retryafter.ReferenceDateHeader {
		t.Errorf("Retry-After equal to Date: %v, want past-date against the date header", d)
	}
}
