package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// ClassDeadline is the last class of a row that its delivery deadline
// ended (and the response class of the event that says so).
const ClassDeadline = "deadline"

// OutcomeDeadline is the outcome of the event of a row that its deadline
// ended without a try.
const OutcomeDeadline = "deadline"

// sweepBatch is how many overdue rows the sweep reads at a time.
const sweepBatch = 500

// SweepTimeout bounds a run of the deadline sweep (its worker's River
// Timeout, not River's JobTimeout, which is sized for a delivery). The
// sweep ends overdue rows sweepBatch at a time, each in a short
// transaction of its own, every Config.SweepInterval (1m by default): a run
// still going after five intervals is stuck, and it holds back the next
// run (one sweep at a time), which goes on where it stopped.
const SweepTimeout = 5 * time.Minute

// SweepArgs moves pending outbox rows past their deadline to dead; it runs
// periodically (PeriodicJobs).
type SweepArgs struct{}

// Kind is the River job kind.
func (SweepArgs) Kind() string { return "crm_deadline_sweep" }

// InsertOpts: the sweep runs on the crm queue, one at a time.
func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: riverunique.ByArgs()}
}

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	o *Outbox
}

// Timeout bounds a run of the sweep (SweepTimeout).
func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return SweepTimeout }

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	if _, err := w.o.Sweep(ctx); err != nil {
		return err
	}
	_, err := w.o.SweepReplays(ctx)
	return err
}

// Sweep moves to dead every pending row whose deadline passed at least
// SweepGrace ago, each with an event saying why, and returns how many it
// moved. The dispatcher ends the rows of live jobs at their deadline; the
// sweep is for rows whose job is gone (cancelled, deleted, lost). A row
// settled meanwhile is left as it is.
func (o *Outbox) Sweep(ctx context.Context) (int, error) {
	n := 0
	for {
		now := o.cfg.Clock.Now()
		ids, err := o.queries.OutboxOverdue(ctx, o.pool, dbsqlc.OutboxOverdueParams{
			Cutoff: pgtime.Write(now.Add(-o.cfg.SweepGrace)), MaxRows: sweepBatch})
		if err != nil {
			return n, fmt.Errorf("listing overdue outbox rows: %w", translate(err))
		}
		moved := 0
		for _, id := range ids {
			r, err := o.RowByID(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue // purged meanwhile
			}
			if err != nil {
				return n, err
			}
			ok, err := o.expire(ctx, r, now, "(sweep)")
			if err != nil {
				return n, err
			}
			if ok {
				moved++
			}
		}
		n += moved
		if len(ids) < sweepBatch || moved == 0 {
			return n, nil
		}
	}
}

// expire moves pending row r, whose deadline has passed at now, to dead
// with an event whose reason says so; how adds to the reason (who noticed).
// It reports whether it moved the row (false: settled meanwhile).
func (o *Outbox) expire(ctx context.Context, r Row, now time.Time, how string) (bool, error) {
	lastOutcome, retriedAt, err := o.history(ctx, r.ID)
	if err != nil {
		return false, err
	}
	var why string
	switch lastOutcome {
	case string(connector.OutcomeThrottled):
		why = "while the CRM kept throttling: last class " + r.LastClass
	case string(connector.OutcomeTransient):
		why = "while the CRM kept failing: last class " + r.LastClass
	default:
		// No try since the commit or the retry: say what held it back.
		d, err := o.ledger.ScopeDeferral(ctx, r.Scope)
		if err != nil {
			return false, err
		}
		why = untried(d, lifeStart(r, retriedAt))
	}
	reason := fmt.Sprintf("delivery deadline passed (%s) %s", deadlineWindow(r, retriedAt), why)
	if how != "" {
		reason += " " + how
	}
	_, err = o.queries.OutboxSettle(ctx, o.pool, dbsqlc.OutboxSettleParams{ID: r.ID, FromState: StatePending, State: StateDead,
		LastClass: ClassDeadline, At: pgtime.Write(now), Outcome: OutcomeDeadline, Reason: reason})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return false, nil // settled meanwhile
	}
	if err != nil {
		return false, err
	}
	o.settled(ctx, r, StateDead)
	attrs := []any{slog.Int64("outbox", r.ID), slog.String("tenant", r.TenantID), slog.String("call_id", r.CallID), slog.String("scope", r.Scope),
		slog.Time("deadline", r.Deadline), slog.String("last_class", r.LastClass)}
	if r.recordingID != uuid.Nil {
		attrs = append(attrs, slog.String("recording_id", r.recordingID.String()))
	}
	o.cfg.Logger.Warn("delivery deadline passed: dead, reviewable (callscribe outbox list --state dead)", attrs...)
	return true, nil
}

// history reads what a row's events say about its current life: the
// outcome of its newest event ("" if none) and when an operator last
// retried it (nil if never).
func (o *Outbox) history(ctx context.Context, id int64) (lastOutcome string, retriedAt *time.Time, err error) {
	lastOutcome, err = o.queries.OutboxEventLastOutcome(ctx, o.pool, id)
	if err = translate(err); err != nil && !errors.Is(err, ErrNotFound) {
		return "", nil, fmt.Errorf("reading the history of outbox row %d: %w", id, err)
	}
	at, err := o.queries.OutboxEventLastRetry(ctx, o.pool, id)
	switch err = translate(err); {
	case err == nil:
		at = at.UTC()
		retriedAt = &at
	case !errors.Is(err, ErrNotFound):
		return "", nil, fmt.Errorf("reading the history of outbox row %d: %w", id, err)
	}
	return lastOutcome, retriedAt, nil
}

// untried says why a row made no try of its own since start, going by its
// scope's deferral d.
func untried(d ledger.Deferral, start time.Time) string {
	switch {
	case d.Paused:
		return fmt.Sprintf("with no try made: the CRM's scope %s is paused (%s)", d.Scope, d.PausedReason)
	case d.NotBefore.After(start):
		return fmt.Sprintf("while the CRM kept throttling: its scope %s stayed deferred and no try of this delivery was admitted", d.Scope)
	}
	return "with no try made (was its delivery job lost?)"
}

// lifeStart is when row r's current life began: its commit, or the
// operator's latest retry at retriedAt.
func lifeStart(r Row, retriedAt *time.Time) time.Time {
	if retriedAt != nil && !retriedAt.Before(r.CreatedAt) {
		return retriedAt.UTC()
	}
	return r.CreatedAt
}

// deadlineWindow is how long row r had, counted from its commit or from
// the operator's retry at retriedAt: "24h after commit".
func deadlineWindow(r Row, retriedAt *time.Time) string {
	start := lifeStart(r, retriedAt)
	if start.Equal(r.CreatedAt) {
		return shortDuration(r.Deadline.Sub(start)) + " after commit"
	}
	return shortDuration(r.Deadline.Sub(start)) + " after the operator's retry"
}

// tooLate is the reason of a row that the CRM's answer res leaves no try
// before its deadline: the next try could start no sooner than next.
func tooLate(r Row, retriedAt *time.Time, res connector.Result, next time.Time) string {
	kept := "kept throttling"
	if res.Outcome == connector.OutcomeTransient {
		kept = "kept failing"
	}
	return fmt.Sprintf("delivery deadline passed (%s) while the CRM %s: last class %s; its next try could start no sooner than %s, after its deadline %s",
		deadlineWindow(r, retriedAt), kept, res.Class, pgtime.Write(next).Format(time.RFC3339), r.Deadline.Format(time.RFC3339))
}

// shortDuration prints d without zero trailing units: 24h, 1m, 1h30m, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// untilDeadline is snooze d cut so that the job of row r wakes no later
// than just after r's deadline, to end it on time.
func untilDeadline(r Row, now time.Time, d time.Duration) time.Duration {
	if left := r.Deadline.Sub(now); d > left {
		return max(left, 0) + 10*time.Millisecond
	}
	return max(d, 0)
}

// settleTooLate records the CRM's answer res and the row's death in one
// event, for an answer that leaves no try before the row's deadline (the
// next could start no sooner than next).
func (o *Outbox) settleTooLate(ctx context.Context, r Row, res connector.Result, next time.Time, log *slog.Logger) error {
	_, retriedAt, err := o.history(ctx, r.ID)
	if err != nil {
		return err
	}
	log.Warn("the next try would fall after the delivery deadline: dead, reviewable (callscribe outbox list --state dead)",
		slog.Time("deadline", r.Deadline), slog.Time("next_try", next))
	return o.settleAs(ctx, r, StateDead, ClassDeadline, res, nil, tooLate(r, retriedAt, res, next))
}

// Backlog is the outbox's pending deliveries at a glance.
type Backlog struct {
	// Pending counts the rows waiting for delivery.
	Pending int64
	// OldestCreatedAt is the commit time of the oldest of them; zero when
	// none is pending.
	OldestCreatedAt time.Time
	// OldestAge is how long ago that was, by the outbox's clock; 0 when
	// none is pending.
	OldestAge time.Duration
}

// Backlog reads how many deliveries are pending and the age of the oldest.
func (o *Outbox) Backlog(ctx context.Context) (Backlog, error) {
	s, err := o.queries.OutboxOldestPending(ctx, o.pool)
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return Backlog{}, nil
	}
	if err != nil {
		return Backlog{}, fmt.Errorf("reading the pending deliveries: %w", err)
	}
	oldest := s.CreatedAt.UTC()
	return Backlog{Pending: s.Pending, OldestCreatedAt: oldest, OldestAge: max(o.cfg.Clock.Now().Sub(oldest), 0)}, nil
}

// CountByState counts the deliveries in each state (StatePending,
// StateDelivered, StateDead); a state with none is absent.
func (o *Outbox) CountByState(ctx context.Context) (map[string]int64, error) {
	rows, err := o.queries.OutboxCountByState(ctx, o.pool)
	if err != nil {
		return nil, fmt.Errorf("counting deliveries by state: %w", translate(err))
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.State] = r.Deliveries
	}
	return out, nil
}

// Listing is what `callscribe outbox list --json` prints: rows, the
// counters and gauges, and the pending deliveries at a glance.
type Listing struct {
	// Pending counts every pending row (whatever the rows were filtered
	// by).
	Pending int64 `json:"pending"`
	// OldestPendingAgeSeconds: whole seconds since the oldest pending row
	// was committed; 0 when none is pending.
	OldestPendingAgeSeconds int64 `json:"oldest_pending_age_seconds"`
	// Counters: every operator counter and gauge by name.
	Counters map[string]int64 `json:"counters"`
	// Rows, oldest first.
	Rows []Row `json:"rows"`
}

// List reads a Listing of the rows in state ("" = any), at most limit of
// them (0: 1000).
func (o *Outbox) List(ctx context.Context, state string, limit int) (Listing, error) {
	rows, err := o.Rows(ctx, state, limit)
	if err != nil {
		return Listing{}, err
	}
	counters, err := o.Counters(ctx)
	if err != nil {
		return Listing{}, err
	}
	b, err := o.Backlog(ctx)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Pending: b.Pending, OldestPendingAgeSeconds: int64(b.OldestAge / time.Second), Counters: counters, Rows: rows}, nil
}
