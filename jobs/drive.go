package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// maxSteps bounds the steps one Work call takes before it yields: a step
// is one state's work or one resubmission, each begun from a fresh read of
// the recording.
const maxSteps = 12

// HeaderAdmittedAt is sent with every submission: when the worker decided
// to send it. A server can tell requests already in flight when it
// announced a cooldown from requests sent after (stt-http simulators do).
const HeaderAdmittedAt = "X-Admitted-At"

// outcomeKind says what drive does after a step.
type outcomeKind int

const (
	// stepNext: read the recording again and take the step its state
	// calls for.
	stepNext outcomeKind = iota
	// stepResubmit: the vendor does not know the submission: read the
	// recording again and, if it is still submitted, submit it again.
	stepResubmit
	// stepSnooze: stop; River runs the job again after outcome.snooze.
	stepSnooze
	// stepDone: stop; this job has nothing more to do.
	stepDone
)

// outcome is what a step asks drive to do next. Errors are returned beside
// it: a step that fails returns its error and drive stops with it (a
// ledger.ErrStateConflict only makes drive read the recording again).
type outcome struct {
	kind outcomeKind
	// snooze: for stepSnooze, how long; never negative.
	snooze time.Duration
	// why: for stepResubmit, the reason recorded with the resubmission.
	why string
}

var (
	next = outcome{kind: stepNext}
	done = outcome{kind: stepDone}
)

func snoozeFor(d time.Duration) outcome { return outcome{kind: stepSnooze, snooze: max(d, 0)} }

func resubmitting(why string) outcome { return outcome{kind: stepResubmit, why: why} }

// stepCtx is what one step knows, resolved once at its start: the job, the
// recording as the ledger has it, and its tenant with the tenant's speech
// vendor. Step functions update rec as they move the recording.
type stepCtx struct {
	jobID int64
	rec   ledger.Recording
	// tenant and prov are the recording's tenant and its vendor; zero when
	// unconfigured is set.
	tenant TenantConfig
	prov   stt.Provider
	// unconfigured: the recording's tenant is not (or no longer) in
	// pipeline.tenants.
	unconfigured error
	// observeOnly: the tenant's scope runs in observe-only mode.
	observeOnly bool
	log         *slog.Logger
	// held: the slots taken for this step's submission.
	held held
	// scopeRead: the scope's deferral, read with the recording
	// (Ledger.RecordingWithScope); the step's first admission check
	// decides from it instead of reading again. Nil when it was not read.
	scopeRead *ledger.ScopeRead
	// sent: what the step's submission recorded when it sent the request
	// (sent_at, and the admission it went out under when read again), for
	// the event that records the answer (answerDetail).
	sent map[string]any
}

// load reads the recording and resolves its tenant for one step. With
// tenantHint (the job's TenantID) naming a configured tenant, the
// recording and its scope's deferral are read in one statement.
func (p *Pipeline) load(ctx context.Context, jobID int64, id uuid.UUID, tenantHint string) (*stepCtx, error) {
	p.adoptFormerScopes(ctx)
	var rec ledger.Recording
	var read *ledger.ScopeRead
	var err error
	if t, ok := p.cfg.Tenants[tenantHint]; ok && tenantHint != "" {
		var sr ledger.ScopeRead
		rec, sr, err = p.ledger.RecordingWithScope(ctx, id, t.Scope)
		read = &sr
	} else {
		rec, err = p.ledger.Recording(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	s := &stepCtx{jobID: jobID, rec: rec}
	t, ok := p.cfg.Tenants[rec.TenantID]
	s.log = p.stepLog(rec, t.Scope, jobID)
	prov := p.providers[rec.TenantID]
	if !ok || prov == nil {
		s.unconfigured = fmt.Errorf("tenant %q is not configured", rec.TenantID)
		return s, nil
	}
	// Only a recording found eligible is admitted right after this read;
	// any other state's step may call the vendor first (a reconcile before
	// a resubmission), after which the read is stale.
	if rec.TenantID == tenantHint && rec.State == ledger.StateEligible {
		s.scopeRead = read
	}
	s.tenant, s.prov, s.observeOnly = t, prov, p.observeOnly(t) || p.rollout.observed(ctx, p.ledger, t.Cohort, p.cfg.RolloutDefault)
	return s, nil
}

// stepLog is the logger of a step of job jobID on rec: every line carries
// the recording's id, tenant and call id, its throttling scope (empty for
// a tenant no longer configured) and River's job id, so that a recording
// can be followed through the log as through `callscribe jobs show`.
func (p *Pipeline) stepLog(rec ledger.Recording, scope string, jobID int64) *slog.Logger {
	return p.log.With(slog.String("recording_id", rec.ID.String()), slog.String("tenant", rec.TenantID),
		slog.String("call_id", rec.CallID), slog.String("scope", scope), slog.Int64("job_id", jobID))
}

// drive is the resumable step function: it reads the recording and takes
// the next step from whatever state it finds, until the recording is done,
// it must wait, or maxSteps steps were taken (then it snoozes for 0 and
// River runs it again). Steps never call each other in a cycle: a step that
// needs another (a resubmission after the vendor forgot the submission)
// returns it as its outcome, and this loop takes it as the next step. It
// never holds a transaction or connection across a vendor call.
func (p *Pipeline) drive(ctx context.Context, jobID int64, id uuid.UUID, tenantHint string) error {
	o := next
	for range maxSteps {
		s, err := p.load(ctx, jobID, id, tenantHint)
		tenantHint = "" // the first read only: later steps follow a write
		if errors.Is(err, ledger.ErrNotFound) {
			return river.JobCancel(fmt.Errorf("recording %s no longer exists (purged?): %w", id, err))
		}
		if err != nil {
			return err
		}
		if s.rec.State.Terminal() || (s.rec.State == ledger.StateValidated && p.commitActions == nil) {
			return nil
		}
		now := p.cfg.Clock.Now()
		if !s.rec.Deadline.IsZero() && !now.Before(s.rec.Deadline) {
			return p.expire(ctx, s.rec, "deadline passed")
		}
		o, err = p.take(ctx, s, o)
		if errors.Is(err, ledger.ErrStateConflict) {
			o = next // another worker moved it; read again
			continue
		}
		if err != nil {
			return err
		}
		switch o.kind {
		case stepDone:
			return nil
		case stepSnooze:
			// Never sleep past the deadline: wake to expire it.
			if !s.rec.Deadline.IsZero() {
				if left := s.rec.Deadline.Sub(now); o.snooze > left {
					o.snooze = left + 10*time.Millisecond
				}
			}
			return river.JobSnooze(o.snooze)
		}
	}
	return river.JobSnooze(0)
}

// take is one step: the one the previous outcome asked for, or the one the
// recording's state calls for.
func (p *Pipeline) take(ctx context.Context, s *stepCtx, o outcome) (outcome, error) {
	st := s.rec.State
	if s.unconfigured != nil && (st == ledger.StateEligible || st == ledger.StateSubmitted || st == ledger.StateTranscribed) {
		_, err := p.move(ctx, s.rec, ledger.StateFailed, s.unconfigured.Error()+": add it to pipeline.tenants",
			func(t *ledger.Transition) { t.ResponseClass = "config" })
		return done, err
	}
	if o.kind == stepResubmit && st == ledger.StateSubmitted {
		return p.resubmit(ctx, s, o.why)
	}
	switch st {
	case ledger.StateReceived:
		_, err := p.move(ctx, s.rec, ledger.StateEligible, "ready for admission", nil)
		return next, err
	case ledger.StateRetryWait:
		if wait := s.rec.NotBefore.Sub(p.cfg.Clock.Now()); wait > 0 {
			return snoozeFor(wait), nil
		}
		_, err := p.move(ctx, s.rec, ledger.StateEligible, "retry wait over", nil)
		return next, err
	case ledger.StateEligible:
		if s.rec.Lane == ledger.LaneBatch && p.manifestMode(s.rec.TenantID) {
			s.log.Debug("left for the batch lane's manifests")
			return done, nil
		}
		return p.admitAndSubmit(ctx, s)
	case ledger.StateSubmitted:
		return p.resume(ctx, s)
	case ledger.StateTranscribed, ledger.StateValidated:
		return done, p.finish(ctx, s, nil)
	}
	return done, nil
}

func (p *Pipeline) move(ctx context.Context, rec ledger.Recording, to ledger.State, reason string, edit func(*ledger.Transition)) (ledger.Recording, error) {
	t := ledger.Transition{RecordingID: rec.ID, From: rec.State, To: to, Reason: reason}
	if edit != nil {
		edit(&t)
	}
	return p.ledger.Transition(ctx, t)
}

func (p *Pipeline) expire(ctx context.Context, rec ledger.Recording, reason string) error {
	_, err := p.move(ctx, rec, ledger.StateExpired, reason, func(t *ledger.Transition) {
		t.Detail = map[string]any{"deadline": rec.Deadline.Format(time.RFC3339Nano), "state": string(rec.State)}
	})
	if errors.Is(err, ledger.ErrStateConflict) {
		return nil // moved on meanwhile; the next read decides
	}
	if err == nil {
		p.log.Info("recording expired", slog.String("recording_id", rec.ID.String()), slog.String("tenant", rec.TenantID),
			slog.String("call_id", rec.CallID), slog.String("from", string(rec.State)))
	}
	return err
}

// observeOnly reports whether pipeline.observe_only_scopes lists t's scope,
// by its name or by the name it had before scopes were named by account.
func (p *Pipeline) observeOnly(t TenantConfig) bool {
	for _, s := range p.cfg.ObserveOnlyScopes {
		if s == t.Scope || (t.formerScope != "" && s == t.formerScope) {
			return true
		}
	}
	return false
}

// Sweep expires every unfinished recording whose deadline has passed, and
// returns how many it expired.
func (p *Pipeline) Sweep(ctx context.Context) (int, error) {
	n := 0
	for {
		ids, err := p.ledger.Overdue(ctx, p.cfg.Clock.Now(), 500)
		if err != nil {
			return n, err
		}
		moved := 0
		for _, id := range ids {
			rec, err := p.ledger.Recording(ctx, id)
			if errors.Is(err, ledger.ErrNotFound) {
				continue // purged meanwhile
			}
			if err != nil {
				return n, err
			}
			if err := p.expire(ctx, rec, "deadline passed (sweep)"); err != nil {
				return n, err
			}
			moved++
		}
		n += moved
		if len(ids) < 500 || moved == 0 {
			return n, nil
		}
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
