package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// ProbeTimeoutDefault is how long a claimed probe holds a scope before
// another job may probe instead (the first may have crashed).
const ProbeTimeoutDefault = time.Minute

// Verdict is ScopeAdmit's answer.
type Verdict string

// The verdicts.
const (
	// VerdictAdmit: go ahead.
	VerdictAdmit Verdict = "admit"
	// VerdictProbe: go ahead as the scope's single probe after a cooldown;
	// report the answer with ScopeProbeSucceeded (or extend the deadline).
	VerdictProbe Verdict = "probe"
	// VerdictDeferred: the scope's deadline has not passed; wait until Until.
	VerdictDeferred Verdict = "deferred"
	// VerdictProbeOut: another job is probing; wait a little (Until) and ask again.
	VerdictProbeOut Verdict = "probe-out"
	// VerdictPaused: an operator must resume the scope first.
	VerdictPaused Verdict = "paused"
)

// Admission says whether a job may send a request to a scope now.
type Admission struct {
	Verdict Verdict
	// Until: when to ask again, for VerdictDeferred and VerdictProbeOut.
	Until    time.Time
	Deferral Deferral
}

// Admitted reports whether the request may be sent.
func (a Admission) Admitted() bool { return a.Verdict == VerdictAdmit || a.Verdict == VerdictProbe }

// ScopeAdmit decides whether job jobID may send a request to scope at the
// ledger's current time: not before the scope's deadline; after a cooldown,
// only one probe (claimed atomically; a claim older than probeTimeout is
// taken over); never while the scope is paused. probeWait is how long the
// others wait before asking again while a probe is out.
func (l *Ledger) ScopeAdmit(ctx context.Context, scope string, jobID int64, probeTimeout, probeWait time.Duration) (Admission, error) {
	if err := l.queries.ScopeDeferralEnsure(ctx, l.pool, dbsqlc.ScopeDeferralEnsureParams{Scope: scope, At: l.now()}); err != nil {
		return Admission{}, fmt.Errorf("reading scope deferral %s: %w", scope, translate(err))
	}
	d := Deferral{Scope: scope}
	row, err := l.queries.ScopeDeferralGetForAdmission(ctx, l.pool, scope)
	switch err = translate(err); {
	case err == nil:
		d = deferralFrom(row)
	case !errors.Is(err, ErrNotFound):
		return Admission{}, fmt.Errorf("reading scope deferral %s: %w", scope, err)
	}
	now := l.now()
	switch {
	case d.Paused:
		return Admission{Verdict: VerdictPaused, Deferral: d}, nil
	case now.Before(d.NotBefore):
		return Admission{Verdict: VerdictDeferred, Until: d.NotBefore, Deferral: d}, nil
	case !d.NeedsProbe:
		return Admission{Verdict: VerdictAdmit, Deferral: d}, nil
	}
	_, err = l.queries.ScopeProbeClaim(ctx, l.pool, dbsqlc.ScopeProbeClaimParams{
		Scope: scope, JobID: jobID, Now: now, ClaimExpiredBefore: now.Add(-probeTimeout),
	})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return Admission{Verdict: VerdictProbeOut, Until: now.Add(probeWait), Deferral: d}, nil
	}
	if err != nil {
		return Admission{}, fmt.Errorf("claiming the probe of scope %s: %w", scope, err)
	}
	return Admission{Verdict: VerdictProbe, Deferral: d}, nil
}

// ScopeProbeSucceeded reopens a scope after its probe got a real answer
// (anything but throttling): every job may send again. jobID 0 reopens
// whoever holds the probe.
func (l *Ledger) ScopeProbeSucceeded(ctx context.Context, scope string, jobID int64) error {
	if err := l.queries.ScopeProbeSucceed(ctx, l.pool, dbsqlc.ScopeProbeSucceedParams{Scope: scope, JobID: jobID}); err != nil {
		return fmt.Errorf("reopening scope %s after its probe: %w", scope, translate(err))
	}
	return nil
}

// ScopePause stops admission to a scope until an operator resumes it.
func (l *Ledger) ScopePause(ctx context.Context, scope, reason string) error {
	if scope == "" {
		return &InvalidError{Field: "scope", Reason: "is required"}
	}
	if err := l.queries.ScopePause(ctx, l.pool, dbsqlc.ScopePauseParams{Scope: scope, At: l.now(), Reason: reason}); err != nil {
		return fmt.Errorf("pausing scope %s: %w", scope, translate(err))
	}
	return nil
}

// ScopeResume lets a paused scope admit again, starting with a probe. It
// returns ErrNotFound when the scope is not paused.
func (l *Ledger) ScopeResume(ctx context.Context, scope string) error {
	_, err := l.queries.ScopeResume(ctx, l.pool, dbsqlc.ScopeResumeParams{Scope: scope, At: l.now()})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return fmt.Errorf("resuming scope %s: it is not paused: %w", scope, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("resuming scope %s: %w", scope, err)
	}
	return nil
}

// ScopeDeferralObserve records an offer for a scope in observe-only mode:
// kept with the others (ObserveOnly), but the deadline does not move.
func (l *Ledger) ScopeDeferralObserve(ctx context.Context, e Extension) error {
	if e.Scope == "" {
		return &InvalidError{Field: "Scope", Reason: "is required"}
	}
	if err := l.queries.ScopeDeferralObserve(ctx, l.pool, dbsqlc.ScopeDeferralObserveParams{
		Scope: e.Scope, OfferedNotBefore: dbTime(e.NotBefore), At: l.now(), RetryAfterRaw: e.RetryAfter,
		Source: e.Source, Clamped: e.Clamped, JobID: nonZero(e.JobID), RecordingID: nonZero(e.RecordingID), Reason: e.Reason,
	}); err != nil {
		return fmt.Errorf("recording an observe-only offer for scope %s: %w", e.Scope, translate(err))
	}
	return nil
}
