package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// ReplayQueue is the River queue of replay work: re-drives of recordings
// and re-deliveries of their action sets to a replay target.
const ReplayQueue = "replay"

// ReplayPriority is the River priority of replay jobs (1 is River's
// highest, 4 its lowest): replay work never goes ahead of other work of
// its queue's workers.
const ReplayPriority = 4

// Defaults of replay.
const (
	// ReplayWorkersDefault is Config.ReplayWorkers when left zero.
	ReplayWorkersDefault = 4
	// ReplayChunkDefault is Config.ReplayChunk when left zero: recordings
	// enqueued per transaction.
	ReplayChunkDefault = 500
)

// States of a replay run.
const (
	RunEnumerating = "enumerating"
	RunRunning     = "running"
	RunDone        = "done"
	RunCancelled   = "cancelled"
)

// StateCancelled is the state of a replay delivery whose run was
// cancelled while it was pending.
const StateCancelled = "cancelled"

// ReplayTarget is a named CRM target that replay runs deliver to (a
// staging CRM): its own throttling scope, never a tenant's, so that a
// replay neither waits on nor eats into production's deferral and window.
type ReplayTarget struct {
	Target connector.Target
	// Scope of the target's throttling: deferral and window. Required.
	Scope string
	// DeliveryDeadline: how long a replay delivery may stay pending after
	// its run enqueued it. Default DeliveryDeadlineDefault.
	DeliveryDeadline time.Duration
	// Production marks a production CRM: a run to it needs
	// ReplayStartOptions.AllowProduction.
	Production bool
}

// ErrProductionTarget: replay refuses a target marked production unless
// explicitly allowed.
var ErrProductionTarget = errors.New("the target is marked production")

// ErrRunNotActive: the run is done or cancelled.
var ErrRunNotActive = errors.New("the replay run is not active")

// ReplayStartOptions chooses what a replay run replays and where.
type ReplayStartOptions struct {
	// From and To bound the recordings' ingest time; To is exclusive.
	From, To time.Time
	// TenantID: "" = every tenant.
	TenantID string
	// State of the recordings to replay. Default committed.
	State ledger.State
	// Target names a Config.ReplayTargets entry.
	Target string
	// AllowProduction lets a run deliver to a target marked production.
	AllowProduction bool
	// StartedBy says who started the run (user@host). Required.
	StartedBy string
	// MaxRate, when above 0, is a ceiling on the run's sends per second,
	// below whatever the target's own signals allow. At most 10,000.
	MaxRate float64
}

// ReplayRecordingArgs re-drives one unfinished recording of a replay run:
// it is re-ingested (converging on its row; the pipeline then runs it
// under its normal admission) and each committed action set of it becomes
// a replay delivery of the run. A finished recording needs no job: its
// chunk's transaction makes its sets deliveries.
type ReplayRecordingArgs struct {
	RunID       int64     `json:"run_id" river:"unique"`
	RecordingID uuid.UUID `json:"recording_id" river:"unique"`
}

// Kind is the River job kind.
func (ReplayRecordingArgs) Kind() string { return "replay_recording" }

// InsertOpts: the replay queue at the lowest priority, one active job per
// run and recording.
// A re-drive that keeps failing (the database away) keeps trying, River's
// backoff growing to days, rather than leave its run short of a recording.
func (ReplayRecordingArgs) InsertOpts() river.InsertOpts { return replayInsertOpts(100) }

// ReplayDeliverArgs delivers one action set of a replay run to the run's
// target.
type ReplayDeliverArgs struct {
	RunID       int64 `json:"run_id" river:"unique"`
	ActionSetID int64 `json:"action_set_id" river:"unique"`
}

// Kind is the River job kind.
func (ReplayDeliverArgs) Kind() string { return "replay_deliver" }

// InsertOpts: the replay queue at the lowest priority, one active job per
// run and set.
func (ReplayDeliverArgs) InsertOpts() river.InsertOpts { return replayInsertOpts(MaxAttemptsDefault) }

func replayInsertOpts(attempts int) river.InsertOpts {
	return river.InsertOpts{Queue: ReplayQueue, Priority: ReplayPriority, MaxAttempts: attempts,
		UniqueOpts: riverunique.ByArgs(rivertype.JobStateRetryable)}
}

// ReplayStart records a replay run and returns its id; ReplayEnumerate
// then enqueues its work. It refuses an unknown target, a production
// target without AllowProduction, and a window or rate that makes no
// sense, saying which.
func (o *Outbox) ReplayStart(ctx context.Context, opts ReplayStartOptions) (int64, error) {
	tgt, ok := o.cfg.ReplayTargets[opts.Target]
	switch {
	case !ok:
		return 0, fmt.Errorf("replay target %q is not configured", opts.Target)
	case tgt.Production && !opts.AllowProduction:
		return 0, fmt.Errorf("replay to %s: %w; give --allow-production to replay into it anyway", opts.Target, ErrProductionTarget)
	case !opts.To.After(opts.From):
		return 0, fmt.Errorf("replay window %s .. %s is empty: the end must be after the start",
			opts.From.Format(time.RFC3339), opts.To.Format(time.RFC3339))
	case opts.MaxRate < 0 || opts.MaxRate > 10000:
		return 0, fmt.Errorf("max rate %g/s: want 0 (none) to 10000", opts.MaxRate)
	case opts.StartedBy == "":
		return 0, errors.New("a replay run needs who started it")
	}
	if opts.State == "" {
		opts.State = ledger.StateCommitted
	}
	if !slices.Contains(ledger.States(), opts.State) {
		return 0, fmt.Errorf("recording state %q is not one of %v", opts.State, ledger.States())
	}
	id, err := o.queries.ReplayRunInsert(ctx, o.pool, dbsqlc.ReplayRunInsertParams{Target: opts.Target, Scope: tgt.Scope,
		TenantID: opts.TenantID, RecordingState: string(opts.State), WindowFrom: opts.From.UTC(), WindowTo: opts.To.UTC(),
		StartedBy: opts.StartedBy, MaxRate: opts.MaxRate, DeadlineSeconds: tgt.DeliveryDeadline.Seconds(), At: pgtime.Write(o.cfg.Clock.Now())})
	if err != nil {
		return 0, fmt.Errorf("recording the replay run: %w", translate(err))
	}
	o.cfg.Logger.Info("replay run started", slog.Int64("run", id), slog.String("target", opts.Target), slog.String("scope", tgt.Scope),
		slog.Time("from", opts.From), slog.Time("to", opts.To), slog.String("tenant", opts.TenantID), slog.Float64("max_rate", opts.MaxRate))
	return id, nil
}

// ReplayEnumerate enqueues run's recordings with client, a chunk
// (Config.ReplayChunk recordings) per transaction that also moves the
// run's cursor, until the window is enumerated: in the chunk's
// transaction each committed set of a finished recording becomes a
// delivery with its job, and each unfinished recording gets a re-drive
// job (ReplayRecordingArgs); progress, when set, is
// told the run's count of enumerated recordings after each chunk. It
// resumes after the last committed chunk, and a second process
// enumerating the same run at once enqueues nothing twice (the cursor is
// compared and set). The run is then running: its jobs do the rest. On a
// run already running it enqueues again the delivery job of each pending
// delivery whose job is gone (discarded, cancelled by an operator): an
// active one is left as it is.
func (o *Outbox) ReplayEnumerate(ctx context.Context, client *river.Client[pgx.Tx], runID int64, progress func(enumerated int64)) error {
	for {
		run, err := o.queries.ReplayRunGet(ctx, o.pool, runID)
		if err != nil {
			return fmt.Errorf("reading replay run %d: %w", runID, translate(err))
		}
		if run.State != RunEnumerating {
			if run.State == RunRunning {
				if err := o.replayRequeue(ctx, client, runID); err != nil {
					return err
				}
			}
			o.replayMaybeFinish(ctx, runID)
			return nil
		}
		f := ledger.PageFilter{State: ledger.State(run.RecordingState), TenantID: run.TenantID, From: run.WindowFrom, To: run.WindowTo,
			Limit: o.cfg.ReplayChunk}
		if run.CursorID != nil && run.CursorCreatedAt != nil {
			f.After = ledger.PageCursor{CreatedAt: *run.CursorCreatedAt, ID: *run.CursorID}
		}
		recs, next, err := o.ledger.RecordingPage(ctx, f)
		if err != nil {
			return err
		}
		p := dbsqlc.ReplayRunAdvanceParams{ID: runID, PrevID: run.CursorID, NextCreatedAt: run.CursorCreatedAt, NextID: run.CursorID,
			N: int64(len(recs)), Last: next.IsZero(), At: pgtime.Write(o.cfg.Clock.Now())}
		if len(recs) > 0 {
			last := recs[len(recs)-1]
			at := pgtime.Write(last.CreatedAt)
			p.NextCreatedAt, p.NextID = &at, &last.ID
		}
		// A finished recording needs no re-ingest: the chunk's transaction
		// makes its committed sets deliveries, with their jobs, at once;
		// an unfinished one gets a job that re-ingests it first.
		var finished []uuid.UUID
		var jobs []river.InsertManyParams
		for _, r := range recs {
			if r.State.Terminal() {
				finished = append(finished, r.ID)
			} else {
				jobs = append(jobs, river.InsertManyParams{Args: ReplayRecordingArgs{RunID: runID, RecordingID: r.ID}})
			}
		}
		p.Redriven = int64(len(finished))
		err = pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
			if _, err := o.queries.ReplayRunAdvance(ctx, tx, p); err != nil {
				return translate(err)
			}
			deliveries, err := o.replayDeliveriesTx(ctx, tx, runID, run.DeadlineSeconds, finished)
			if err != nil {
				return err
			}
			if jobs = append(jobs, deliveries...); len(jobs) == 0 {
				return nil
			}
			_, err = client.InsertManyTx(ctx, tx, jobs)
			return err
		})
		switch {
		case errors.Is(err, ErrNotFound):
			continue // another process moved the cursor, or the run ended: read it again
		case err != nil:
			return fmt.Errorf("enqueueing a chunk of replay run %d: %w", runID, err)
		}
		if progress != nil {
			progress(run.Enumerated + int64(len(recs)))
		}
	}
}

// replayRequeue inserts a delivery job for each pending delivery of run
// that has no active one (the jobs are unique by run and set while
// active). The read and the insert are one transaction holding the
// deliveries' rows: were they apart, a job could settle its delivery and
// complete between them, and the insert would find no active job and
// enqueue a second.
func (o *Outbox) replayRequeue(ctx context.Context, client *river.Client[pgx.Tx], runID int64) error {
	var fresh int
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		ids, err := o.queries.ReplayPendingOf(ctx, tx, runID)
		if err != nil {
			return fmt.Errorf("listing the pending deliveries of replay run %d: %w", runID, translate(err))
		}
		if len(ids) == 0 {
			return nil
		}
		jobs := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			jobs[i] = river.InsertManyParams{Args: ReplayDeliverArgs{RunID: runID, ActionSetID: id}}
		}
		res, err := client.InsertManyTx(ctx, tx, jobs)
		if err != nil {
			return fmt.Errorf("enqueueing the pending deliveries of replay run %d: %w", runID, err)
		}
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				fresh++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if fresh > 0 {
		o.cfg.Logger.Warn("replay: pending deliveries had lost their jobs; enqueued again", slog.Int64("run", runID), slog.Int("deliveries", fresh))
	}
	return nil
}

// SweepReplays ends every pending replay delivery whose deadline passed
// at least SweepGrace ago (its job, which would have ended it, is gone),
// dead with why, and returns how many it ended; each run left with nothing
// pending is then done.
func (o *Outbox) SweepReplays(ctx context.Context) (int, error) {
	n := 0
	for {
		rows, err := o.queries.ReplayOverdue(ctx, o.pool, dbsqlc.ReplayOverdueParams{Cutoff: pgtime.Write(o.cfg.Clock.Now().Add(-o.cfg.SweepGrace)),
			MaxRows: sweepBatch})
		if err != nil {
			return n, fmt.Errorf("listing overdue replay deliveries: %w", translate(err))
		}
		for _, r := range rows {
			s := &subject{Row: Row{ActionSetID: r.ActionSetID, Target: r.Target, Deadline: r.Deadline.UTC(), LastClass: r.LastClass}}
			st := &replayStore{o: o, s: s, run: r.RunID}
			if err := st.settle(ctx, StateDead, ClassDeadline, connector.Result{Outcome: OutcomeDeadline}, nil,
				fmt.Sprintf("replay delivery deadline %s passed with no try under way (was its job lost?); last class %q",
					s.Deadline.Format(time.RFC3339), r.LastClass)); err != nil {
				return n, err
			}
			n++
		}
		if len(rows) < sweepBatch {
			if n > 0 {
				o.cfg.Logger.Warn("replay: deliveries past their deadline ended by the sweep: dead", slog.Int("deliveries", n))
			}
			return n, nil
		}
	}
}

// replayRecordingWorker re-drives one recording of a run.
type replayRecordingWorker struct {
	river.WorkerDefaults[ReplayRecordingArgs]
	o *Outbox
}

func (w *replayRecordingWorker) Work(ctx context.Context, job *river.Job[ReplayRecordingArgs]) error {
	o, a := w.o, job.Args
	run, err := o.queries.ReplayRunGet(ctx, o.pool, a.RunID)
	if err != nil {
		if err = translate(err); errors.Is(err, ErrNotFound) {
			return river.JobCancel(err)
		}
		return err
	}
	if run.State == RunCancelled {
		return nil
	}
	log := o.cfg.Logger.With(slog.Int64("run", a.RunID), slog.String("recording_id", a.RecordingID.String()))
	rec, err := o.ledger.Recording(ctx, a.RecordingID)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		log.Warn("replay: the recording is gone (purged since the run enumerated it): nothing to re-drive")
	case err != nil:
		return err
	case !rec.State.Terminal() && o.cfg.Reingest != nil:
		// Unfinished: re-ingested by its business key, converging on its
		// row; the pipeline runs it under its normal admission.
		if err := o.cfg.Reingest(ctx, rec); err != nil {
			if job.Attempt < job.MaxAttempts {
				return fmt.Errorf("re-ingesting recording %s: %w", a.RecordingID, err)
			}
			log.Warn("replay: the recording could not be re-ingested; its committed action sets are replayed all the same",
				slog.String("error", err.Error()))
		}
	}
	now := pgtime.Write(o.cfg.Clock.Now())
	err = pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		jobs, err := o.replayDeliveriesTx(ctx, tx, a.RunID, run.DeadlineSeconds, []uuid.UUID{a.RecordingID})
		if err != nil {
			return err
		}
		if len(jobs) > 0 {
			client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
			if err != nil {
				return err
			}
			if _, err := client.InsertManyTx(ctx, tx, jobs); err != nil {
				return err
			}
		}
		if err := o.queries.ReplayRunRecordingDone(ctx, tx, dbsqlc.ReplayRunRecordingDoneParams{ID: a.RunID, At: now}); err != nil {
			return translate(err)
		}
		// Completed in the same transaction: a crash after the commit
		// cannot re-drive it (and count it) twice.
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	o.replayMaybeFinish(ctx, a.RunID)
	return nil
}

// replayDeliveriesTx makes each committed action set of recordings a
// delivery of run (deadline: now + deadlineSeconds) in tx, unless it is
// one already, and returns the jobs that deliver the new ones, for the
// caller to insert in tx.
func (o *Outbox) replayDeliveriesTx(ctx context.Context, tx pgx.Tx, runID int64, deadlineSeconds float64, recordings []uuid.UUID) ([]river.InsertManyParams, error) {
	if len(recordings) == 0 {
		return nil, nil
	}
	ids, err := o.queries.ActionSetIDsOfRecordings(ctx, tx, recordings)
	if err != nil || len(ids) == 0 {
		return nil, translate(err)
	}
	now := pgtime.Write(o.cfg.Clock.Now())
	added, err := o.queries.ReplayDeliveryInsertMany(ctx, tx, dbsqlc.ReplayDeliveryInsertManyParams{RunID: runID,
		Deadline: now.Add(time.Duration(deadlineSeconds * float64(time.Second))), At: now, SetIds: ids})
	if err != nil {
		return nil, fmt.Errorf("recording the deliveries of replay run %d: %w", runID, translate(err))
	}
	jobs := make([]river.InsertManyParams, len(added))
	for i, id := range added {
		jobs[i] = river.InsertManyParams{Args: ReplayDeliverArgs{RunID: runID, ActionSetID: id}}
	}
	return jobs, nil
}

// replayDeliverWorker delivers one set of a run.
type replayDeliverWorker struct {
	river.WorkerDefaults[ReplayDeliverArgs]
	o *Outbox
}

func (w *replayDeliverWorker) Work(ctx context.Context, job *river.Job[ReplayDeliverArgs]) error {
	return w.o.replayDeliver(ctx, job.ID, job.Args)
}

// replayDeliver is one try of a replay delivery: the dispatcher's try
// (Outbox.try) on the run's target and scope, recorded in the run's
// tables.
func (o *Outbox) replayDeliver(ctx context.Context, jobID int64, a ReplayDeliverArgs) error {
	d, err := o.queries.ReplayDeliveryGet(ctx, o.pool, dbsqlc.ReplayDeliveryGetParams{RunID: a.RunID, ActionSetID: a.ActionSetID})
	if err != nil {
		if err = translate(err); errors.Is(err, ErrNotFound) {
			return river.JobCancel(err)
		}
		return err
	}
	if d.RunState == RunCancelled || d.State != StatePending {
		return nil
	}
	name := strconv.FormatInt(a.RunID, 10) + ":" + strconv.FormatInt(a.ActionSetID, 10)
	s := &subject{
		Row: Row{ID: d.ActionSetID, ActionSetID: d.ActionSetID, Target: d.Target, Scope: d.Scope, State: d.State,
			Attempts: int(d.Attempts), LastClass: d.LastClass, NotBefore: pgtime.Read(d.NotBefore), CreatedAt: d.CreatedAt.UTC(),
			Deadline: d.Deadline.UTC(), TenantID: d.TenantID, CallID: d.CallID},
		set: dbsqlc.ActionSet{ID: d.ActionSetID, RecordingID: d.RecordingID, TenantID: d.TenantID, CallID: d.CallID,
			ActionVersion: d.ActionVersion, RecordingSha256: d.RecordingSha256, Actions: d.Actions, CommittedAt: d.CommittedAt},
		holder:  "replay:" + name,
		lane:    lane.Batch,
		logAttr: slog.String("replay", name),
	}
	tgt, ok := o.cfg.ReplayTargets[d.Target]
	if !ok || tgt.Target == nil || tgt.Scope != d.Scope {
		// Another process's configuration has the target: this one leaves
		// the delivery to it (its deadline still ends it).
		o.cfg.Logger.Warn("replay: this process has no replay target of the run's name and scope (crm_targets): leaving the delivery to one that has",
			s.logAttr, slog.String("target", d.Target), slog.String("scope", d.Scope))
		return river.JobSnooze(untilDeadline(s.Row, o.cfg.Clock.Now(), 30*time.Second))
	}
	s.target = tgt.Target
	s.store = &replayStore{o: o, s: s, run: a.RunID, maxRate: d.MaxRate}
	return o.try(ctx, jobID, s, nil)
}

// replayStore records the tries of a replay delivery in replay_deliveries
// and replay_tries, and its end as an audit event on the set's outbox
// rows.
type replayStore struct {
	o       *Outbox
	s       *subject
	run     int64
	maxRate float64
	// slot is the rate ceiling's slot this try took (nil: none).
	slot *time.Time
	// tried: the try was recorded (its answer goes with the settle).
	tried bool
}

func (st *replayStore) ready(ctx context.Context) (time.Duration, error) {
	if st.maxRate <= 0 {
		return 0, nil
	}
	r, err := st.o.queries.ReplayRateTake(ctx, st.o.pool, st.run)
	if err != nil {
		return 0, fmt.Errorf("taking a send slot of replay run %d: %w", st.run, translate(err))
	}
	if !r.Took {
		return max(time.Duration(r.WaitMs*float64(time.Millisecond)), time.Millisecond), nil
	}
	slot := r.Slot.UTC()
	st.slot = &slot
	return 0, nil
}

func (st *replayStore) try(ctx context.Context, _ time.Time, adm ledger.Admission) (int, error) {
	n, err := st.o.queries.ReplayTry(ctx, st.o.pool, dbsqlc.ReplayTryParams{RunID: st.run, ActionSetID: st.s.ActionSetID,
		Scope: st.s.Scope, AdmittedSeq: adm.Seq, AdmittedAt: pgtime.Write(adm.At), RateSlot: st.slot, At: pgtime.Write(st.o.cfg.Clock.Now())})
	if err != nil {
		return 0, translate(err)
	}
	st.tried = true
	return int(n), nil
}

func (st *replayStore) readmit(ctx context.Context, attempt int, adm ledger.Admission) error {
	p := dbsqlc.ReplayTryReadmitParams{RunID: st.run, ActionSetID: st.s.ActionSetID, Attempt: int32(attempt), Sent: adm.Admitted(),
		AdmittedSeq: adm.Seq, AdmittedAt: pgtime.Write(adm.At), At: pgtime.Write(st.o.cfg.Clock.Now())}
	if err := st.o.queries.ReplayTryReadmit(ctx, st.o.pool, p); err != nil {
		return fmt.Errorf("recording the recheck of replay delivery %d:%d: %w", st.run, st.s.ActionSetID, translate(err))
	}
	st.tried = adm.Admitted()
	return nil
}

func (st *replayStore) settle(ctx context.Context, state, rowClass string, res connector.Result, notBefore *time.Time, reason string) error {
	outcome := string(res.Outcome)
	if outcome == "" {
		outcome = state
	}
	class := res.Class
	if rowClass != "" {
		class = rowClass
	}
	p := dbsqlc.ReplaySettleParams{RunID: st.run, ActionSetID: st.s.ActionSetID, State: state, Outcome: outcome, LastClass: class,
		CrmID: res.CRMID, Reason: reason, NotBefore: pgtime.WritePtr(notBefore), HttpStatus: int32(res.HTTPStatus), Answered: st.tried,
		At: pgtime.Write(st.o.cfg.Clock.Now()), AuditReason: "replayed to " + st.s.Target + " (run " + strconv.FormatInt(st.run, 10) + ")"}
	if state == StatePending {
		switch res.Outcome {
		case connector.OutcomeThrottled:
			p.Throttled = 1
		case connector.OutcomeTransient:
			p.Transient = 1
		}
	}
	_, err := st.o.queries.ReplaySettle(ctx, st.o.pool, p)
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return nil // settled meanwhile (or the run was cancelled)
	}
	if err != nil {
		return fmt.Errorf("recording replay delivery %d:%d: %w", st.run, st.s.ActionSetID, err)
	}
	if state != StatePending {
		st.o.replayMaybeFinish(ctx, st.run)
	}
	return nil
}

func (st *replayStore) expire(ctx context.Context, _ time.Time) error {
	return st.settle(ctx, StateDead, ClassDeadline, connector.Result{Outcome: OutcomeDeadline}, nil,
		fmt.Sprintf("replay delivery deadline %s passed; last class %q", st.s.Deadline.Format(time.RFC3339), st.s.LastClass))
}

func (st *replayStore) tooLate(ctx context.Context, res connector.Result, next time.Time, log *slog.Logger) error {
	log.Warn("replay: the next try would fall after the delivery deadline: dead", slog.Time("deadline", st.s.Deadline), slog.Time("next_try", next))
	return st.settle(ctx, StateDead, ClassDeadline, res, nil,
		fmt.Sprintf("replay delivery deadline %s passed while the CRM answered %s; its next try could start no sooner than %s",
			st.s.Deadline.Format(time.RFC3339), res.Class, pgtime.Write(next).Format(time.RFC3339)))
}

// replayMaybeFinish ends run when its work is all done.
func (o *Outbox) replayMaybeFinish(ctx context.Context, runID int64) {
	ctx = context.WithoutCancel(ctx)
	at := pgtime.Write(o.cfg.Clock.Now())
	_, err := o.queries.ReplayRunFinish(ctx, o.pool, dbsqlc.ReplayRunFinishParams{ID: runID, At: &at})
	switch err = translate(err); {
	case err == nil:
		o.cfg.Logger.Info("replay run done", slog.Int64("run", runID))
	case !errors.Is(err, ErrNotFound):
		o.cfg.Logger.Warn("replay: could not check whether the run is done", slog.Int64("run", runID), slog.String("error", err.Error()))
	}
}

// ReplayCancel cancels an active run: its pending deliveries are
// cancelled and its jobs end at their next turn (a try already sent
// records nothing more). It returns how many deliveries it cancelled;
// ErrNotFound for no such run, ErrRunNotActive for one done or cancelled.
func (o *Outbox) ReplayCancel(ctx context.Context, runID int64, reason string) (int64, error) {
	if reason == "" {
		reason = "cancelled by an operator"
	}
	at := pgtime.Write(o.cfg.Clock.Now())
	r, err := o.queries.ReplayRunCancel(ctx, o.pool, dbsqlc.ReplayRunCancelParams{ID: runID, Reason: reason, At: &at})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		if _, gerr := o.queries.ReplayRunGet(ctx, o.pool, runID); errors.Is(translate(gerr), ErrNotFound) {
			return 0, fmt.Errorf("replay run %d: %w", runID, ErrNotFound)
		}
		return 0, fmt.Errorf("replay run %d: %w", runID, ErrRunNotActive)
	}
	if err != nil {
		return 0, fmt.Errorf("cancelling replay run %d: %w", runID, err)
	}
	o.cfg.Logger.Info("replay run cancelled", slog.Int64("run", runID), slog.Int64("deliveries_cancelled", r.Deliveries))
	return r.Deliveries, nil
}
