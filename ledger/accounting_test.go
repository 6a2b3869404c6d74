package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/callscribe/callscribe/ledger"
)

// skewed is the system clock shifted by d: a worker whose clock runs fast
// (d > 0) or slow.
type skewed time.Duration

func (s skewed) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// The exact rule, case by case: which submissions ignored a known
// cooldown (an offer numbered up to their admitted_seq still deferred the
// scope at admitted_at), which were in flight (a later offer announced
// before sent_at), and what is not judged (withdrawn, or observe-only
// offers for an enforced submission).
func TestSubmissionAccountingExactRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	far := time.Now().Add(24 * time.Hour)
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	ext := func(scope string, nb time.Time) int64 {
		r, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: nb, Source: "retry-after"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Seq
	}
	if s := ext("s", t0.Add(10*time.Second)); s != 1 {
		t.Fatalf("first offer numbered %d, want 1", s)
	}
	// submission moves a new recording to submitted with detail and, when
	// answer is set, on to retry_wait with answer as the next event.
	submission := func(detail, answer map[string]any) string {
		r := b.walk(t, b.ingest(t), ledger.StateEligible)
		r, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: ledger.StateSubmitted, Reason: "admitted", Detail: detail})
		if err != nil {
			t.Fatal(err)
		}
		if answer != nil {
			if _, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: ledger.StateRetryWait, Reason: "answer", Detail: answer}); err != nil {
				t.Fatal(err)
			}
		}
		return r.CallID
	}
	sub := func(scope string, seq int64, at time.Time) map[string]any {
		return map[string]any{"scope": scope, "probe": false, "admitted_seq": seq, "admitted_at": stamp(at)}
	}
	ignored := submission(sub("s", 1, t0.Add(time.Second)), nil)
	fine := submission(sub("s", 1, t0.Add(20*time.Second)), map[string]any{"sent_at": stamp(t0.Add(20*time.Second + time.Millisecond))})
	submission(sub("s", 1, t0.Add(time.Second)), map[string]any{"withdrawn": true, "admitted_seq": 1, "admitted_at": stamp(t0.Add(time.Second))})
	readAgain := submission(sub("s", 1, t0.Add(time.Second)), map[string]any{"admitted_seq": 1, "admitted_at": stamp(t0.Add(20 * time.Second)),
		"sent_at": stamp(t0.Add(20*time.Second + time.Millisecond))})
	admittedEarly := sub("s", 0, t0)
	ext("s", far) // offer 2, announced now (the database's clock)
	inFlight := submission(admittedEarly, map[string]any{"sent_at": stamp(time.Now().Add(time.Second))})
	// An observe-only offer counts for observed submissions only.
	if err := b.ledger.ScopeDeferralObserve(ctx, ledger.Extension{Scope: "obs", NotBefore: far, Source: "retry-after"}); err != nil {
		t.Fatal(err)
	}
	enforcedAfterObserve := submission(sub("obs", 1, t0), nil)
	observedDetail := sub("obs", 1, t0)
	observedDetail["observe"] = true
	observed := submission(observedDetail, nil)

	checks, err := b.ledger.SubmissionChecks(ctx, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ledger.SubmissionCheck{}
	for _, c := range checks {
		got[c.CallID] = c
	}
	if len(checks) != 6 {
		t.Errorf("%d submissions judged, want 6 (the withdrawn one is not a submission): %+v", len(checks), checks)
	}
	for _, w := range []struct {
		call               string
		ignored, inFlight  bool
		ignoredSeq, flight int64
	}{
		{ignored, true, false, 1, 0},
		{fine, false, false, 0, 0},
		{readAgain, false, false, 0, 0},
		{inFlight, false, true, 0, 2},
		{enforcedAfterObserve, false, false, 0, 0},
		{observed, true, false, 1, 0},
	} {
		c, ok := got[w.call]
		if !ok {
			t.Errorf("%s not judged", w.call)
			continue
		}
		if c.Ignored() != w.ignored || c.InFlight() != w.inFlight || c.IgnoredSeq != w.ignoredSeq || c.InFlightSeq != w.flight {
			t.Errorf("%s: ignored %v (offer %d), in flight %v (offer %d); want %v (%d), %v (%d)", w.call,
				c.Ignored(), c.IgnoredSeq, c.InFlight(), c.InFlightSeq, w.ignored, w.ignoredSeq, w.inFlight, w.flight)
		}
	}
	acc := ledger.AccountFor(checks)
	if acc.Submissions != 6 || acc.IgnoredKnownCooldown != 2 || acc.InFlight != 1 || acc.Sent != 3 || acc.GapP50 != time.Millisecond {
		t.Errorf("accounting %+v", acc)
	}
}

// Offers are numbered per scope in the order written, observe-only ones
// too; an admission returns the number it read and the instant it
// compared the deadline to; a recheck refuses a deferred scope.
func TestScopeSequenceAndRecheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, err := b.ledger.ScopeAdmit(ctx, "q", 1, time.Minute, time.Second)
	if err != nil || !a.Admitted() || a.Seq != 0 {
		t.Fatalf("fresh scope: %+v %v", a, err)
	}
	for i := 1; i <= 3; i++ {
		r, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: "q", NotBefore: b.clock.Now().Add(time.Hour), Source: "x"})
		if err != nil || r.Seq != int64(i) {
			t.Fatalf("offer %d numbered %d (%v)", i, r.Seq, err)
		}
	}
	if err := b.ledger.ScopeDeferralObserve(ctx, ledger.Extension{Scope: "q", NotBefore: b.clock.Now(), Source: "x"}); err != nil {
		t.Fatal(err)
	}
	a, err = b.ledger.ScopeAdmit(ctx, "q", 1, time.Minute, time.Second)
	if err != nil || a.Verdict != ledger.VerdictDeferred || a.Seq != 4 || a.At.IsZero() {
		t.Fatalf("deferred scope: %+v %v, want deferred having read seq 4", a, err)
	}
	exts, err := b.ledger.ScopeDeferralExtensions(ctx, "q")
	if err != nil || len(exts) != 4 {
		t.Fatal(exts, err)
	}
	for i, x := range exts {
		if x.Seq != int64(i+1) {
			t.Errorf("offer %d has seq %d", i, x.Seq)
		}
	}
	re, err := b.ledger.ScopeRecheck(ctx, "q", 1, false, ledger.AdmitPolicy{ProbeWait: time.Second})
	if err != nil || re.Admitted() || re.Wait <= 0 {
		t.Fatalf("recheck of a deferred scope: %+v %v", re, err)
	}
	re, err = b.ledger.ScopeRecheck(ctx, "q", 1, false, ledger.AdmitPolicy{ObserveOnly: true})
	if err != nil || !re.Admitted() || re.Seq != 4 {
		t.Fatalf("observe-only recheck: %+v %v", re, err)
	}
}

// The clock policy: a ledger on the database's clock (no Clock given)
// corrects a worker clock that runs 5 s fast or slow, and admission
// compares deadlines to the database's own reading, so neither worker can
// submit into a cooldown early or write a deadline the other reads as past.
func TestDatabaseClockCorrectsASkewedWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	fast, err := ledger.New(b.pool, &ledger.Config{LocalClock: skewed(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := ledger.New(b.pool, &ledger.Config{LocalClock: skewed(-5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*ledger.Ledger{"fast": fast, "slow": slow} {
		if err := l.SyncClock(ctx); err != nil {
			t.Fatal(err)
		}
		// Wide margin: the two readings differ by the offset's error (half
		// a round trip) plus the time between them, never by the 5 s skew.
		if d := time.Until(l.Clock().Now()); d > time.Second || d < -time.Second {
			t.Errorf("%s worker: the database's clock reads %s off", name, d)
		}
	}
	// The slow worker is throttled: 3 s from now on the database's clock.
	if _, err := slow.ScopeDeferralExtend(ctx, ledger.Extension{Scope: "skew", NotBefore: slow.Clock().Now().Add(3 * time.Second), Source: "retry-after"}); err != nil {
		t.Fatal(err)
	}
	// Neither worker is admitted before it: the fast one would be by its
	// own clock (it reads 2 s past the deadline), the slow one's deadline
	// would be 2 s in the past by the database's had it used its own.
	for name, l := range map[string]*ledger.Ledger{"fast": fast, "slow": slow} {
		a, err := l.ScopeAdmit(ctx, "skew", 7, time.Minute, time.Second)
		if err != nil || a.Verdict != ledger.VerdictDeferred {
			t.Errorf("%s worker admitted inside the cooldown: %+v %v", name, a, err)
		}
	}
}
