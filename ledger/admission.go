package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// Defaults of admission, the one owner of each: jobs.Config and
// outbox.Config refer to them.
const (
	// ProbeTimeoutDefault is how long a claimed probe holds a scope before
	// another job may probe instead (the first may have crashed).
	ProbeTimeoutDefault = time.Minute
	// ProbeWaitDefault is how long the others wait before asking again
	// while a probe is out, when a configuration leaves it zero.
	ProbeWaitDefault = time.Second
	// PausedRecheckDefault is AdmitPolicy.PausedRecheck when left zero.
	PausedRecheckDefault = 30 * time.Second
	// AdmissionMaxAgeDefault is how long after the scope read that
	// admitted it a request may still be sent without reading the scope
	// again, when a configuration leaves it zero.
	AdmissionMaxAgeDefault = 100 * time.Millisecond
)

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
	// Wait is, from ScopeAdmitWait, how long a refused job waits before
	// asking again (AdmitPolicy.Wait); 0 when admitted and from ScopeAdmit.
	Wait time.Duration
	// Seq is the scope's sequence number the decision read: the offers
	// (extensions) it knew of are exactly those numbered up to Seq. A
	// submission records it as its admitted_seq.
	Seq int64
	// At is the instant the decision compared the scope's deadline to: the
	// database's clock, read in the same statement as the deadline (the
	// ledger's own clock when it was given one). A submission records it
	// as its admitted_at.
	At time.Time
	// ReadAt is the ledger clock's reading just before the scope was read:
	// the admission's age (Age) is measured from it.
	ReadAt time.Time
}

// Admitted reports whether the request may be sent.
func (a Admission) Admitted() bool { return a.Verdict == VerdictAdmit || a.Verdict == VerdictProbe }

// Age is how long ago, at now (the ledger's clock), the admission's read
// began. A request is not sent more than an allowed age after its
// admission without asking again (ScopeRecheck).
func (a Admission) Age(now time.Time) time.Duration { return now.Sub(a.ReadAt) }

// ScopeAdmit decides whether job jobID may send a request to scope at the
// ledger's current time: not before the scope's deadline; after a cooldown,
// only one probe (claimed atomically; a claim older than probeTimeout is
// taken over); never while the scope is paused. probeWait is how long the
// others wait before asking again while a probe is out.
func (l *Ledger) ScopeAdmit(ctx context.Context, scope string, jobID int64, probeTimeout, probeWait time.Duration) (Admission, error) {
	read, err := l.readForAdmission(ctx, scope)
	if err != nil {
		return Admission{}, err
	}
	return l.admitFrom(ctx, read, jobID, probeTimeout, probeWait)
}

// readForAdmission reads scope's deferral as an admission does, with the
// database's clock: the scope's key shared, then the row, in one round
// trip and one implicit transaction (readScope), so that the read waits
// for an extension being written. A scope without a row may have its first
// extension being inserted, whose statement takes the key only at its end:
// ensure the row (that insert waits for it) and read again.
func (l *Ledger) readForAdmission(ctx context.Context, scope string) (ScopeRead, error) {
	read := ScopeRead{Scope: scope, Deferral: Deferral{Scope: scope}, ReadAt: l.config.Clock.Now()}
	before := l.localNow()
	row, err := l.readScope(ctx, scope)
	if err = translate(err); errors.Is(err, ErrNotFound) {
		if err := l.queries.ScopeDeferralEnsure(ctx, l.pool, dbsqlc.ScopeDeferralEnsureParams{Scope: scope, At: l.now()}); err != nil {
			return ScopeRead{}, fmt.Errorf("reading scope deferral %s: %w", scope, translate(err))
		}
		before = l.localNow()
		row, err = l.readScope(ctx, scope)
		err = translate(err)
	}
	switch {
	case err == nil:
		read.Found, read.Deferral, read.DBNow = true, deferralFrom(row.ScopeDeferral), row.DbNow.UTC()
		l.sampleClock(before, read.DBNow)
	case !errors.Is(err, ErrNotFound):
		return ScopeRead{}, fmt.Errorf("reading scope deferral %s: %w", scope, err)
	}
	return read, nil
}

// readScope sends ScopeDeferralReadLock and ScopeDeferralGetForAdmission
// in one batch: one round trip, one implicit transaction, no row lock.
func (l *Ledger) readScope(ctx context.Context, scope string) (dbsqlc.ScopeDeferralGetForAdmissionRow, error) {
	var row dbsqlc.ScopeDeferralGetForAdmissionRow
	var rerr error
	b := &pgx.Batch{}
	dbsqlc.QueueScopeDeferralReadLock(b, scope)
	dbsqlc.QueueScopeDeferralGetForAdmission(b, scope, func(r dbsqlc.ScopeDeferralGetForAdmissionRow, err error) { row, rerr = r, err })
	if err := l.pool.SendBatch(ctx, b).Close(); err != nil {
		return row, err
	}
	return row, rerr
}

// localNow is the local clock under the database's (zero for a ledger
// given its own clock: nothing to measure).
func (l *Ledger) localNow() time.Time {
	if l.dbClock == nil {
		return time.Time{}
	}
	return l.dbClock.local.Now()
}

// sampleClock measures the database clock's offset from a read that began
// at the local reading before and returned the database's reading db.
func (l *Ledger) sampleClock(before, db time.Time) {
	if l.dbClock != nil && !before.IsZero() {
		l.dbClock.sample(before, l.dbClock.local.Now(), db)
	}
}

// admissionNow is the instant an admission compares a deadline to: the
// database's clock as read with the deadline (dbNow), or the ledger's own
// clock when it was given one or the read did not return the database's.
func (l *Ledger) admissionNow(dbNow time.Time) time.Time {
	if l.dbClock != nil && !dbNow.IsZero() {
		return pgtime.Write(dbNow)
	}
	return l.now()
}

// admitFrom decides ScopeAdmit from read, the scope's deferral as just
// read for admission.
func (l *Ledger) admitFrom(ctx context.Context, read ScopeRead, jobID int64, probeTimeout, probeWait time.Duration) (Admission, error) {
	d := read.Deferral
	scope := d.Scope
	now := l.admissionNow(read.DBNow)
	base := Admission{Deferral: d, Seq: d.Seq, At: now, ReadAt: read.ReadAt}
	switch {
	case d.Paused:
		base.Verdict = VerdictPaused
		return base, nil
	case now.Before(d.NotBefore):
		base.Verdict, base.Until = VerdictDeferred, d.NotBefore
		return base, nil
	case !d.NeedsProbe:
		base.Verdict = VerdictAdmit
		return base, nil
	}
	_, err := l.queries.ScopeProbeClaim(ctx, l.pool, dbsqlc.ScopeProbeClaimParams{
		Scope: scope, JobID: jobID, Now: now, ClaimExpiredBefore: now.Add(-probeTimeout),
	})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		base.Verdict, base.Until = VerdictProbeOut, now.Add(probeWait)
		return base, nil
	}
	if err != nil {
		return Admission{}, fmt.Errorf("claiming the probe of scope %s: %w", scope, err)
	}
	base.Verdict = VerdictProbe
	return base, nil
}

// ScopeRecheck reads scope again for a request admitted earlier (by
// ScopeAdmit or ScopeAdmitWait) that has not been sent yet, and says
// whether it may still be sent: not while the scope is paused or before
// its deadline, and, when the scope needs a probe, only by the probe
// (probe: the earlier admission made jobID the probe). It claims nothing.
// In observe-only mode (p.ObserveOnly) it only reads the scope's sequence
// number and admits. A refused recheck has Wait set as ScopeAdmitWait's.
func (l *Ledger) ScopeRecheck(ctx context.Context, scope string, jobID int64, probe bool, p AdmitPolicy) (Admission, error) {
	read, err := l.readForAdmission(ctx, scope)
	if err != nil {
		return Admission{}, err
	}
	d := read.Deferral
	now := l.admissionNow(read.DBNow)
	a := Admission{Deferral: d, Seq: d.Seq, At: now, ReadAt: read.ReadAt}
	switch {
	case p.ObserveOnly:
		a.Verdict = VerdictAdmit
	case d.Paused:
		a.Verdict = VerdictPaused
	case now.Before(d.NotBefore):
		a.Verdict, a.Until = VerdictDeferred, d.NotBefore
	case d.NeedsProbe && (!probe || d.ProbeJobID != jobID):
		a.Verdict, a.Until = VerdictProbeOut, now.Add(p.ProbeWait)
	case probe:
		a.Verdict = VerdictProbe
	default:
		a.Verdict = VerdictAdmit
	}
	return l.withWait(a, nil, p)
}

// ScopeRead is a scope's deferral as an admission check reads it (FOR
// SHARE: it waits for an extension being written), with the database's
// clock; RecordingWithScope and QueueScopeRead make one in the same
// statement or round trip as their own, for ScopeAdmitWaitFrom.
type ScopeRead struct {
	Scope string
	// Found: the scope had its row (every scope after its first
	// admission). Without one, ScopeAdmitWaitFrom reads again.
	Found    bool
	Deferral Deferral
	// DBNow is the database's clock at the read.
	DBNow time.Time
	// ReadAt is the ledger clock's reading just before the read.
	ReadAt time.Time
}

// RecordingWithScope reads recording id and, in the same round trip and
// transaction, scope's deferral the way an admission check reads it (the
// scope's key shared first: it waits for an extension being written).
// A job's step reads both at once so that admitting it costs no second
// round trip. It returns ErrNotFound when the recording does not exist.
func (l *Ledger) RecordingWithScope(ctx context.Context, id uuid.UUID, scope string) (Recording, ScopeRead, error) {
	readAt, before := l.config.Clock.Now(), l.localNow()
	var row dbsqlc.RecordingGetWithScopeRow
	var err error
	b := &pgx.Batch{}
	dbsqlc.QueueScopeDeferralReadLock(b, scope)
	dbsqlc.QueueRecordingGetWithScope(b, dbsqlc.RecordingGetWithScopeParams{ID: id, Scope: scope},
		func(r dbsqlc.RecordingGetWithScopeRow, rerr error) { row, err = r, rerr })
	if berr := l.pool.SendBatch(ctx, b).Close(); berr != nil {
		err = berr
	}
	if err != nil {
		return Recording{}, ScopeRead{}, fmt.Errorf("reading recording %s: %w", id, translate(err))
	}
	read := ScopeRead{Scope: scope, Found: row.DScope != "", DBNow: row.DbNow.UTC(), ReadAt: readAt}
	l.sampleClock(before, read.DBNow)
	if read.Found {
		read.Deferral = deferralFrom(dbsqlc.ScopeDeferral{Scope: row.DScope, NotBefore: row.DNotBefore, UpdatedAt: row.DUpdatedAt,
			NeedsProbe: row.DNeedsProbe, ProbeJobID: row.DProbeJobID, ProbeClaimedAt: row.DProbeClaimedAt, Paused: row.DPaused,
			PausedReason: row.DPausedReason, PausedAt: row.DPausedAt, Seq: row.DSeq})
	}
	return recordingFrom(row.Recording), read, nil
}

// QueueScopeRead queues on b the read of scope's deferral that an
// admission check makes (the scope's key shared, then the row: it waits
// for an extension being written), for ScopeAdmitWaitFrom. A caller sends it with its own
// statements in one round trip; outside a transaction, pgx sends a batch
// as one implicit transaction, so the read costs no commit of its own. The
// ScopeRead returned is filled in when b's results have been read; a read
// that failed or found no row leaves Found false, and the admission then
// reads again.
func (l *Ledger) QueueScopeRead(b *pgx.Batch, scope string) *ScopeRead {
	read := &ScopeRead{Scope: scope, ReadAt: l.config.Clock.Now()}
	dbsqlc.QueueScopeDeferralReadLock(b, scope)
	dbsqlc.QueueScopeDeferralGetForAdmission(b, scope, func(row dbsqlc.ScopeDeferralGetForAdmissionRow, err error) {
		if err == nil {
			read.Found, read.Deferral, read.DBNow = true, deferralFrom(row.ScopeDeferral), row.DbNow.UTC()
		}
	})
	return read
}

// ScopeAdmitWaitFrom is ScopeAdmitWait deciding from read, made by
// RecordingWithScope just before, instead of reading the scope again (a
// read that found no row reads again, as ScopeAdmit does).
func (l *Ledger) ScopeAdmitWaitFrom(ctx context.Context, read ScopeRead, jobID int64, p AdmitPolicy) (Admission, error) {
	if !read.Found {
		return l.ScopeAdmitWait(ctx, read.Scope, jobID, p)
	}
	if p.ObserveOnly {
		return observed(read, l.admissionNow(read.DBNow)), nil
	}
	a, err := l.admitFrom(ctx, read, jobID, p.ProbeTimeout, p.ProbeWait)
	return l.withWait(a, err, p)
}

// observed is the admission of observe-only mode: admitted whatever the
// scope's state, with the sequence number the read found.
func observed(read ScopeRead, now time.Time) Admission {
	return Admission{Verdict: VerdictAdmit, Deferral: read.Deferral, Seq: read.Deferral.Seq, At: now, ReadAt: read.ReadAt}
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

// ScopeAdopt carries scope former's admission state (its deadline, whether
// the next request must be a probe, a pause) over to scope, once: when
// scope has no row yet and former has one. It reports whether it did.
// former's row and offers are left as they are, to be read. It serves a
// scope renamed by configuration (jobs names scopes by an account label
// where it once named them by a hash of the vendor key), so that a
// cooldown or a pause in force is not lost with the old name.
func (l *Ledger) ScopeAdopt(ctx context.Context, former, scope string) (bool, error) {
	if former == "" || scope == "" || former == scope {
		return false, &InvalidError{Field: "scope", Reason: "both names are required, and they must differ"}
	}
	_, err := l.queries.ScopeDeferralAdopt(ctx, l.pool, dbsqlc.ScopeDeferralAdoptParams{NewScope: scope, At: l.now(), FormerScope: former})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("carrying scope %s over to %s: %w", former, scope, err)
	}
	return true, nil
}

// ScopeDeferralObserve records an offer for a scope in observe-only mode:
// kept with the others (ObserveOnly), but the deadline does not move.
func (l *Ledger) ScopeDeferralObserve(ctx context.Context, e Extension) error {
	return l.scopeDeferralObserve(ctx, l.pool, e)
}

func (l *Ledger) scopeDeferralObserve(ctx context.Context, db dbsqlc.DBTX, e Extension) error {
	if e.Scope == "" {
		return &InvalidError{Field: "Scope", Reason: "is required"}
	}
	if err := l.queries.ScopeDeferralObserve(ctx, db, dbsqlc.ScopeDeferralObserveParams{
		Scope: e.Scope, OfferedNotBefore: pgtime.Write(e.NotBefore), At: l.now(), RetryAfterRaw: e.RetryAfter,
		Source: e.Source, Clamped: e.Clamped, JobID: nonZero(e.JobID), RecordingID: nonZero(e.RecordingID), Reason: e.Reason,
	}); err != nil {
		return fmt.Errorf("recording an observe-only offer for scope %s: %w", e.Scope, translate(err))
	}
	return nil
}

// DeferredJitter bounds the random delay ScopeAdmitWait adds to a deferred
// job's wait, so that the jobs of a scope do not all wake at its deadline
// and the probe goes first.
const DeferredJitter = 250 * time.Millisecond

// AdmitPolicy says how ScopeAdmitWait admits a job to a scope and how long
// a refused job waits before asking again.
type AdmitPolicy struct {
	// ProbeTimeout and ProbeWait are ScopeAdmit's: how long a claimed probe
	// holds the scope, and the base wait of the others while it is out
	// (they wait ProbeWait plus up to ProbeWait of jitter). Passed as they
	// are: the callers' configurations give their defaults.
	ProbeTimeout, ProbeWait time.Duration
	// PausedRecheck is how long a job of a paused scope waits before
	// asking again. Default PausedRecheckDefault (30s); zero means the
	// default.
	PausedRecheck time.Duration
	// ObserveOnly: the scope runs in observe-only mode: every job is
	// admitted whatever the scope's state (throttling is only recorded;
	// see ThrottlePolicy.ObserveOnly); the scope is still read, for the
	// sequence number the submission records.
	ObserveOnly bool
	// Clock measures the wait from now to the admission's Until. Default
	// (nil): the ledger's clock.
	Clock clock.Clock
	// Rand draws the jitter. Default (nil): the goroutine-safe functions of
	// math/rand/v2.
	Rand retryafter.Rand
}

// Wait returns how long a job refused admission a, asking at now, waits
// before asking again: until a.Until plus up to DeferredJitter (deferred),
// until a.Until plus up to ProbeWait (a probe is out), or PausedRecheck
// (paused). It is 0 for an admitted job and never negative.
func (p AdmitPolicy) Wait(a Admission, now time.Time) time.Duration {
	r := p.Rand
	if r == nil {
		r = globalRand{}
	}
	var d time.Duration
	switch a.Verdict {
	case VerdictDeferred:
		d = a.Until.Sub(now) + time.Duration(r.Int64N(int64(DeferredJitter)))
	case VerdictProbeOut:
		d = a.Until.Sub(now) + time.Duration(r.Int64N(int64(p.ProbeWait)+1))
	case VerdictPaused:
		d = cmp.Or(p.PausedRecheck, PausedRecheckDefault)
	}
	return max(d, 0)
}

// ScopeAdmitWait is the one admission check of jobs and outbox: ScopeAdmit
// under p (in observe-only mode, an admission whatever the scope's state,
// with the sequence number read), with Admission.Wait set from
// AdmitPolicy.Wait when the job is refused.
func (l *Ledger) ScopeAdmitWait(ctx context.Context, scope string, jobID int64, p AdmitPolicy) (Admission, error) {
	read, err := l.readForAdmission(ctx, scope)
	if err != nil {
		return Admission{}, err
	}
	if p.ObserveOnly {
		return observed(read, l.admissionNow(read.DBNow)), nil
	}
	a, err := l.admitFrom(ctx, read, jobID, p.ProbeTimeout, p.ProbeWait)
	return l.withWait(a, err, p)
}

// withWait sets a refused admission's Wait under p.
func (l *Ledger) withWait(a Admission, err error, p AdmitPolicy) (Admission, error) {
	if err != nil || a.Admitted() {
		return a, err
	}
	c := p.Clock
	if c == nil {
		c = l.config.Clock
	}
	a.Wait = p.Wait(a, c.Now())
	return a, nil
}

// globalRand draws from the goroutine-safe top-level functions of
// math/rand/v2.
type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }
