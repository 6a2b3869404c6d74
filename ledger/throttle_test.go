package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// fixedRand always draws pick(n).
type fixedRand struct{ pick func(n int64) int64 }

func (r fixedRand) Int64N(n int64) int64 { return r.pick(n) }

var (
	lowest  = fixedRand{pick: func(int64) int64 { return 0 }}
	highest = fixedRand{pick: func(n int64) int64 { return n - 1 }}
)

func strp(s string) *string { return &s }

func TestThrottlePolicyDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pol := retryafter.Policy{Clock: clock.NewStub(now), Rand: highest, MaxDelay: time.Hour}
	rec := uuid.New()
	secs := func(n int) *time.Duration { d := time.Duration(n) * time.Second; return &d }
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	backoff0 := now.Add(retryafter.BaseBackoffDefault - 1) // highest jitter of attempt 0

	cases := []struct {
		name        string
		sig         ledger.ThrottleSignal
		observe     bool
		wantNB      time.Time
		wantSource  string
		wantRaw     *string
		wantReason  string
		wantBackoff time.Time
	}{
		{name: "retry-after seconds", sig: ledger.ThrottleSignal{RetryAfter: strp("120")},
			wantNB: now.Add(2 * time.Minute), wantSource: "retry-after", wantRaw: strp("120")},
		{name: "retry-after clamped", sig: ledger.ThrottleSignal{RetryAfter: strp("86400")},
			wantNB: now.Add(time.Hour), wantSource: "retry-after", wantRaw: strp("86400"), wantReason: "asked for 24h0m0s, clamped to 1h0m0s"},
		{name: "missing header: backoff", sig: ledger.ThrottleSignal{},
			wantNB: backoff0, wantSource: "backoff", wantReason: "backoff: Retry-After missing (attempt 0)"},
		{name: "malformed header: backoff, raw kept", sig: ledger.ThrottleSignal{RetryAfter: strp("soon")},
			wantNB: backoff0, wantSource: "backoff", wantRaw: strp("soon"), wantReason: "backoff: Retry-After non-numeric (attempt 0)"},
		{name: "vendor delay preferred to retry-after",
			sig:    ledger.ThrottleSignal{RetryAfter: strp("120"), VendorDelay: secs(7), VendorDelayHeader: "x-ratelimit-reset-requests", VendorDelayRaw: "7s"},
			wantNB: now.Add(7 * time.Second), wantSource: "vendor-delay", wantRaw: strp("7s")},
		{name: "vendor header alone is the raw header",
			sig:    ledger.ThrottleSignal{VendorDelay: secs(3), VendorDelayHeader: "x-hubspot-ratelimit-interval-milliseconds", VendorDelayRaw: "3000"},
			wantNB: now.Add(3 * time.Second), wantSource: "vendor-delay", wantRaw: strp("x-hubspot-ratelimit-interval-milliseconds: 3000")},
		{name: "unparsed vendor header is still recorded",
			sig:    ledger.ThrottleSignal{VendorDelayHeader: "x-ratelimit-reset-requests", VendorDelayRaw: "soon"},
			wantNB: backoff0, wantSource: "backoff", wantRaw: strp("x-ratelimit-reset-requests: soon"), wantReason: "backoff: Retry-After missing (attempt 0)"},
		{name: "later vendor reset wins",
			sig:    ledger.ThrottleSignal{RetryAfter: strp("10"), DeferUntil: at(5 * time.Hour), DeferReason: "daily limit"},
			wantNB: now.Add(5 * time.Hour), wantSource: ledger.SourceVendorReset, wantRaw: strp("10"), wantReason: "daily limit"},
		{name: "earlier vendor reset loses, its reason stays",
			sig:    ledger.ThrottleSignal{RetryAfter: strp("60"), DeferUntil: at(time.Second), DeferReason: "daily limit"},
			wantNB: now.Add(time.Minute), wantSource: "retry-after", wantRaw: strp("60"), wantReason: "daily limit"},
		{name: "observe-only: offer recorded, work backs off alone", sig: ledger.ThrottleSignal{RetryAfter: strp("120"), Attempt: 2},
			observe: true, wantNB: now.Add(2 * time.Minute), wantSource: "retry-after", wantRaw: strp("120"), wantReason: "observe-only: ",
			wantBackoff: now.Add(4*retryafter.BaseBackoffDefault - 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.sig.Scope, tc.sig.JobID, tc.sig.RecordingID = "s", 7, rec
			got := ledger.ThrottlePolicy{RetryAfter: pol, ObserveOnly: tc.observe}.Decide(tc.sig)
			e := got.Extension
			if !e.NotBefore.Equal(tc.wantNB) || e.Source != tc.wantSource || e.Reason != tc.wantReason {
				t.Errorf("extension = not_before %s source %q reason %q; want %s %q %q", e.NotBefore, e.Source, e.Reason, tc.wantNB, tc.wantSource, tc.wantReason)
			}
			if (e.RetryAfter == nil) != (tc.wantRaw == nil) || e.RetryAfter != nil && *e.RetryAfter != *tc.wantRaw {
				t.Errorf("raw header = %v, want %v", deref(e.RetryAfter), deref(tc.wantRaw))
			}
			if e.Scope != "s" || e.JobID != 7 || e.RecordingID != rec {
				t.Errorf("extension lost its cause: %+v", e)
			}
			if !got.Backoff.Equal(tc.wantBackoff) {
				t.Errorf("backoff = %s, want %s", got.Backoff, tc.wantBackoff)
			}
			if got.Decision.Attempt != tc.sig.Attempt {
				t.Errorf("decision sized for attempt %d, want %d", got.Decision.Attempt, tc.sig.Attempt)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// Whatever the signal, the offered deadline is never before now, never
// before the header's decision, and never after the later of MaxDelay and
// the vendor's own reset.
func TestThrottlePolicyDecideBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		pol := retryafter.Policy{Clock: clock.NewStub(now), MaxDelay: time.Hour}
		var sig ledger.ThrottleSignal
		if rapid.Bool().Draw(t, "has retry-after") {
			sig.RetryAfter = strp(rapid.SampledFrom([]string{"0", "1", "120", "99999999", "-5", "1.5", "", "Sun, 01 Mar 2026 12:05:00 GMT"}).Draw(t, "retry-after"))
		}
		if rapid.Bool().Draw(t, "has vendor delay") {
			d := time.Duration(rapid.Int64Range(-int64(time.Hour), 3*int64(time.Hour)).Draw(t, "vendor delay"))
			sig.VendorDelay, sig.VendorDelayHeader, sig.VendorDelayRaw = &d, "x-vendor", d.String()
		}
		var reset time.Time
		if rapid.Bool().Draw(t, "has reset") {
			reset = now.Add(time.Duration(rapid.Int64Range(-int64(time.Hour), 48*int64(time.Hour)).Draw(t, "reset")))
			sig.DeferUntil = &reset
		}
		sig.Attempt = rapid.IntRange(0, 40).Draw(t, "attempt")
		got := ledger.ThrottlePolicy{RetryAfter: pol}.Decide(sig)
		nb := got.Extension.NotBefore
		if nb.Before(now) || nb.Before(got.Decision.NotBefore) {
			t.Fatalf("offer %s before now %s or the decision %s", nb, now, got.Decision.NotBefore)
		}
		limit := now.Add(time.Hour)
		if reset.After(limit) {
			limit = reset
		}
		if nb.After(limit) {
			t.Fatalf("offer %s after %s", nb, limit)
		}
		if (got.Extension.Source == ledger.SourceVendorReset) != (sig.DeferUntil != nil && reset.After(got.Decision.NotBefore)) {
			t.Fatalf("source %q with reset %v and decision %s", got.Extension.Source, sig.DeferUntil, got.Decision.NotBefore)
		}
	})
}

func TestAdmitPolicyWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(10 * time.Second)
	cases := []struct {
		name string
		a    ledger.Admission
		pol  ledger.AdmitPolicy
		want time.Duration
	}{
		{"admitted", ledger.Admission{Verdict: ledger.VerdictAdmit}, ledger.AdmitPolicy{Rand: highest}, 0},
		{"probe", ledger.Admission{Verdict: ledger.VerdictProbe}, ledger.AdmitPolicy{Rand: highest}, 0},
		{"deferred, least jitter", ledger.Admission{Verdict: ledger.VerdictDeferred, Until: until}, ledger.AdmitPolicy{Rand: lowest}, 10 * time.Second},
		{"deferred, most jitter", ledger.Admission{Verdict: ledger.VerdictDeferred, Until: until}, ledger.AdmitPolicy{Rand: highest},
			10*time.Second + ledger.DeferredJitter - 1},
		{"deferred in the past", ledger.Admission{Verdict: ledger.VerdictDeferred, Until: now.Add(-time.Minute)}, ledger.AdmitPolicy{Rand: highest}, 0},
		{"probe out, least jitter", ledger.Admission{Verdict: ledger.VerdictProbeOut, Until: until}, ledger.AdmitPolicy{ProbeWait: time.Second, Rand: lowest},
			10 * time.Second},
		{"probe out, most jitter", ledger.Admission{Verdict: ledger.VerdictProbeOut, Until: until}, ledger.AdmitPolicy{ProbeWait: time.Second, Rand: highest},
			11 * time.Second},
		{"probe out, no probe wait", ledger.Admission{Verdict: ledger.VerdictProbeOut, Until: until}, ledger.AdmitPolicy{Rand: highest}, 10 * time.Second},
		{"paused, default", ledger.Admission{Verdict: ledger.VerdictPaused}, ledger.AdmitPolicy{Rand: highest}, ledger.PausedRecheckDefault},
		{"paused, configured", ledger.Admission{Verdict: ledger.VerdictPaused}, ledger.AdmitPolicy{PausedRecheck: time.Minute}, time.Minute},
	}
	for _, tc := range cases {
		if got := tc.pol.Wait(tc.a, now); got != tc.want {
			t.Errorf("%s: Wait = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestScopeAdmitWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const scope = "generic:k2:general"
	pol := ledger.AdmitPolicy{ProbeTimeout: time.Minute, ProbeWait: time.Second, Rand: lowest}

	a, err := b.ledger.ScopeAdmitWait(ctx, scope, 1, pol)
	if err != nil || a.Verdict != ledger.VerdictAdmit || a.Wait != 0 {
		t.Fatalf("fresh scope: %+v, %v", a, err)
	}
	now := b.clock.Now()
	if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: now.Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	pol.Clock = clock.NewStub(now)
	a, err = b.ledger.ScopeAdmitWait(ctx, scope, 1, pol)
	if err != nil || a.Verdict != ledger.VerdictDeferred || a.Wait != 10*time.Second {
		t.Fatalf("during cooldown: %+v, %v; want deferred, wait 10s", a, err)
	}
	observe := pol
	observe.ObserveOnly = true
	if a, err := b.ledger.ScopeAdmitWait(ctx, scope, 1, observe); err != nil || a.Verdict != ledger.VerdictAdmit || a.Wait != 0 {
		t.Fatalf("observe-only during cooldown: %+v, %v; want admitted", a, err)
	}
	if err := b.ledger.ScopePause(ctx, scope, "insufficient_quota"); err != nil {
		t.Fatal(err)
	}
	if a, err := b.ledger.ScopeAdmitWait(ctx, scope, 1, pol); err != nil || a.Verdict != ledger.VerdictPaused || a.Wait != ledger.PausedRecheckDefault {
		t.Fatalf("paused: %+v, %v", a, err)
	}
}

func TestScopeDeferralFromSignal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const scope = "openai:k3:whisper"
	now := b.clock.Now()
	pol := ledger.ThrottlePolicy{RetryAfter: retryafter.Policy{Clock: clock.NewStub(now), Rand: lowest}}
	rec := uuid.New()

	if _, err := b.ledger.ScopeDeferralFromSignal(ctx, pol, ledger.ThrottleSignal{RetryAfter: strp("60")}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("signal without a scope: %v, want ErrInvalid", err)
	}
	res, err := b.ledger.ScopeDeferralFromSignal(ctx, pol, ledger.ThrottleSignal{Scope: scope, RetryAfter: strp("60"), JobID: 9, RecordingID: rec})
	if err != nil || !res.NotBefore.Equal(now.Add(time.Minute)) || !res.Scope.Moved {
		t.Fatalf("first signal: %+v, %v; want the deadline at +1m", res, err)
	}
	// An earlier offer does not move it back; the work waits for the scope.
	res, err = b.ledger.ScopeDeferralFromSignal(ctx, pol, ledger.ThrottleSignal{Scope: scope, RetryAfter: strp("5")})
	if err != nil || !res.NotBefore.Equal(now.Add(time.Minute)) || res.Scope.Moved {
		t.Fatalf("earlier offer: %+v, %v; want the deadline kept at +1m", res, err)
	}
	// Observe-only: recorded, the deadline stays, the work backs off alone.
	observe := pol
	observe.ObserveOnly = true
	res, err = b.ledger.ScopeDeferralFromSignal(ctx, observe, ledger.ThrottleSignal{Scope: scope, RetryAfter: strp("3600")})
	if err != nil || !res.NotBefore.Equal(now) || !res.Backoff.Equal(now) {
		t.Fatalf("observe-only: %+v, %v; want the work's own backoff (least jitter: now)", res, err)
	}
	d, err := b.ledger.ScopeDeferral(ctx, scope)
	if err != nil || !d.NotBefore.Equal(now.Add(time.Minute).Truncate(time.Microsecond)) {
		t.Fatalf("scope after observe-only: %+v, %v; want the deadline at +1m", d, err)
	}
	exts, err := b.ledger.ScopeDeferralExtensions(ctx, scope)
	if err != nil || len(exts) != 3 {
		t.Fatalf("extensions = %d, %v; want 3", len(exts), err)
	}
	first, last := exts[0], exts[2]
	if deref(first.RetryAfter) != "60" || first.JobID != 9 || first.RecordingID != rec || first.Source != "retry-after" || first.ObserveOnly {
		t.Fatalf("first extension = %+v", first)
	}
	if !last.ObserveOnly || deref(last.RetryAfter) != "3600" || last.Reason != "observe-only: " {
		t.Fatalf("observe-only extension = %+v", last)
	}
}
