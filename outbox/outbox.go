package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/fielderr"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// Queue is the River queue of CRM deliveries.
const Queue = "crm"

// Defaults of Config.
const (
	MaxAttemptsDefault = 25
	WorkersDefault     = 10
	// PromptDefault is Config.Prompt when left zero.
	PromptDefault = 20
	// OrphanAfterDefault is Config.OrphanAfter when left zero.
	OrphanAfterDefault = time.Minute
	// DeliveryDeadlineDefault is Destination.DeliveryDeadline when left
	// zero: a delivery still pending a day after its commit is dead.
	DeliveryDeadlineDefault = 24 * time.Hour
	// SweepIntervalDefault is Config.SweepInterval when left zero.
	SweepIntervalDefault = time.Minute
	// SweepGraceDefault is Config.SweepGrace when left zero.
	SweepGraceDefault = 5 * time.Minute
)

// CounterDuplicateKeyConflicts counts commits that met an action set another
// worker had already committed (and converged on it).
const CounterDuplicateKeyConflicts = "duplicate_key_conflicts"

// Destination is where a tenant's action sets are delivered.
type Destination struct {
	// Name of the target, stored on the outbox row (for example "webhook").
	Name string
	// Scope is the throttling scope of the tenant's CRM integration: a CRM
	// 429 pauses deliveries to it, not the pipeline.
	Scope  string
	Target connector.Target
	// DeliveryDeadline: how long a delivery to this target may stay
	// pending. Each outbox row's deadline is fixed when it is committed
	// (commit time + DeliveryDeadline) and renewed by an operator's Retry
	// (retry time + DeliveryDeadline); a row still pending at its
	// deadline goes to dead, whatever the CRM keeps answering. Default
	// (0): DeliveryDeadlineDefault (24h). Negative is refused by New.
	DeliveryDeadline time.Duration
}

// Config configures an Outbox.
type Config struct {
	// Destinations by tenant id. A tenant without one gets its action sets
	// committed with no delivery.
	Destinations map[string]Destination
	// MaxAttempts: tries of one delivery before it is dead. Default 25.
	MaxAttempts int
	// Workers: River MaxWorkers of the crm queue. Default 10.
	Workers int
	// Prompt: how many deliveries this process tries at once right after
	// their commit, in the process and outside River (a group commit's
	// rows, each on a place taken in the commit; the rest get their River
	// job there). A prompt try that meets a wait (the scope not open, a
	// full CRM window, a throttle, an error) hands the row to a River job.
	// Default 20; -1: none, every delivery is a River job's.
	Prompt int
	// OrphanAfter: a pending row untouched this long with no active River
	// job is given one by the adoption job (AdoptArgs; a prompt try cut
	// short by a crash or a stop). It must be longer than a try takes (the CRM
	// call's timeout); a try that outlasts it may be tried twice at once,
	// which the idempotency key makes harmless. Default 1m.
	OrphanAfter time.Duration
	// SweepInterval: how often the deadline sweep (PeriodicJobs) moves
	// pending rows past their deadline to dead. Default 1m.
	SweepInterval time.Duration
	// SweepGrace: the sweep leaves a pending row alone until this long
	// after its deadline, so that a try begun just before the deadline
	// (bounded by River's JobTimeout) can record the CRM's answer. The
	// dispatcher ends the rows of its live jobs at their deadline; the
	// sweep catches rows whose job is gone. Default 5m.
	SweepGrace time.Duration
	// ProbeTimeout, ProbeWait: as for speech vendors (ledger.ScopeAdmit).
	// Defaults ledger.ProbeTimeoutDefault (1m) and ledger.ProbeWaitDefault
	// (1s).
	ProbeTimeout, ProbeWait time.Duration
	// AdmissionMaxAge: no delivery is sent more than this long after the
	// scope read that admitted it without reading the scope again (a wait
	// for the window slot, the try's write); a refusal puts the try back
	// in line unsent. Default ledger.AdmissionMaxAgeDefault (100ms).
	AdmissionMaxAge time.Duration
	// RetryAfter turns the CRM's timing signals into deadlines.
	RetryAfter retryafter.Policy
	// Window, when set, is the scopes' concurrency windows shared by every
	// process (capacity.Windows, the one the speech pipeline uses): each
	// try takes a slot of its CRM scope's window (holder "outbox:<row
	// id>", the earliest delivery deadline first), waits in line for one,
	// and gives it back with what the CRM answered; a throttled answer that
	// defers the scope restarts the window from its probe. The window
	// reads Redis's time: the scope deadlines it is given must be the
	// system clock's. Default nil: no window (admission is the scope's
	// deadline and probe only).
	Window *capacity.Windows
	// Clock stamps commits and delivery tries (stored in UTC) and measures
	// snoozes; it is also RetryAfter's clock when that has none. Default
	// (nil): the ledger's clock (the database's, as this process
	// estimates it; ledger.Ledger.Clock).
	Clock clock.Clock
	// Logger receives the dispatcher's logs. Default (nil): discard.
	Logger *slog.Logger
	// Metrics records what the dispatcher does (metrics.Metrics in
	// callscribe). Default (nil): nothing is recorded.
	Metrics Metrics
	// Committer writes each try and each settlement in a group
	// transaction shared with other steps of this process (group commit).
	// It must be on the outbox's pool: callscribe passes the ledger's
	// (ledger.Ledger.Committer). Default (nil): one of the outbox's own on
	// its pool, with ledger.CommitConfig's defaults.
	Committer *ledger.Committer

	// ReplayTargets are the named CRM targets replay runs deliver to
	// (ReplayStart), each with its own scope. A replay delivery whose
	// target this process lacks is left to a process that has it.
	ReplayTargets map[string]ReplayTarget
	// ReplayWorkers: River MaxWorkers of the replay queue. Default 4.
	ReplayWorkers int
	// ReplayChunk: recordings a replay run enqueues per transaction.
	// Default 500.
	ReplayChunk int
	// Reingest re-ingests an unfinished recording of a replay run by its
	// business key, converging on its row (jobs.Pipeline.Ingest in
	// callscribe). Default nil: unfinished recordings are not re-ingested.
	Reingest func(ctx context.Context, rec ledger.Recording) error
}

// Metrics records the dispatcher's events, each once, by the try that
// made it happen, after the outbox recorded it.
type Metrics interface {
	// CRMThrottled: a throttled answer of target for scope.
	CRMThrottled(target, scope string, status int)
	// CRMCooldown: a throttled answer moved scope's deadline to length from
	// now.
	CRMCooldown(scope string, length time.Duration)
	// CRMSettled: a row of target was settled as state (delivered, dead),
	// by a try or by its deadline; for delivered, receiptToCRM is the time
	// since its recording's receipt (0 if unknown).
	CRMSettled(target, state string, receiptToCRM time.Duration)
}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) CRMThrottled(string, string, int)         {}
func (noMetrics) CRMCooldown(string, time.Duration)        {}
func (noMetrics) CRMSettled(string, string, time.Duration) {}

// WithDefaults returns c with every zero field set to its default.
// Negative values are kept, for Validate to refuse.
func (c Config) WithDefaults() Config {
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.Prompt = cmp.Or(c.Prompt, PromptDefault)
	c.OrphanAfter = cmp.Or(c.OrphanAfter, OrphanAfterDefault)
	c.SweepInterval = cmp.Or(c.SweepInterval, SweepIntervalDefault)
	c.SweepGrace = cmp.Or(c.SweepGrace, SweepGraceDefault)
	if c.Destinations != nil {
		dests := make(map[string]Destination, len(c.Destinations))
		for id, d := range c.Destinations {
			d.DeliveryDeadline = cmp.Or(d.DeliveryDeadline, DeliveryDeadlineDefault)
			dests[id] = d
		}
		c.Destinations = dests
	}
	if c.ReplayTargets != nil {
		targets := make(map[string]ReplayTarget, len(c.ReplayTargets))
		for name, t := range c.ReplayTargets {
			t.DeliveryDeadline = cmp.Or(t.DeliveryDeadline, DeliveryDeadlineDefault)
			targets[name] = t
		}
		c.ReplayTargets = targets
	}
	c.ReplayWorkers = cmp.Or(c.ReplayWorkers, ReplayWorkersDefault)
	c.ReplayChunk = cmp.Or(c.ReplayChunk, ReplayChunkDefault)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, ledger.ProbeTimeoutDefault)
	c.ProbeWait = cmp.Or(c.ProbeWait, ledger.ProbeWaitDefault)
	c.AdmissionMaxAge = cmp.Or(c.AdmissionMaxAge, ledger.AdmissionMaxAgeDefault)
	c.Clock = cmp.Or[clock.Clock](c.Clock, clock.System{})
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.RetryAfter.Clock = cmp.Or(c.RetryAfter.Clock, c.Clock)
	c.RetryAfter = c.RetryAfter.WithDefaults()
	return c
}

// Validate reports every problem with c (defaults applied), each a
// *fielderr.Error naming the field by its Go path, e.g.
// Destinations["acme"].DeliveryDeadline.
func (c Config) Validate() error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(c.Destinations)) {
		if d := c.Destinations[id].DeliveryDeadline; d < 0 {
			errs = append(errs, fielderr.In(fielderr.Errorf("DeliveryDeadline", "%s must be positive", d), "Destinations", fielderr.Key(id)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.ReplayTargets)) {
		t := c.ReplayTargets[name]
		if t.DeliveryDeadline < 0 {
			errs = append(errs, fielderr.In(fielderr.Errorf("DeliveryDeadline", "%s must be positive", t.DeliveryDeadline), "ReplayTargets", fielderr.Key(name)))
		}
		if t.Scope == "" {
			errs = append(errs, fielderr.In(fielderr.Errorf("Scope", "is required"), "ReplayTargets", fielderr.Key(name)))
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"SweepInterval", c.SweepInterval}, {"SweepGrace", c.SweepGrace}, {"ProbeTimeout", c.ProbeTimeout}, {"ProbeWait", c.ProbeWait}, {"AdmissionMaxAge", c.AdmissionMaxAge}, {"OrphanAfter", c.OrphanAfter}} {
		if f.d < 0 {
			errs = append(errs, fielderr.Errorf(f.name, "%s must not be negative", f.d))
		}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"MaxAttempts", c.MaxAttempts}, {"Workers", c.Workers}, {"ReplayWorkers", c.ReplayWorkers}, {"ReplayChunk", c.ReplayChunk}} {
		if f.n < 0 {
			errs = append(errs, fielderr.Errorf(f.name, "%d must be positive", f.n))
		}
	}
	if c.Prompt < -1 {
		errs = append(errs, fielderr.Errorf("Prompt", "%d: want a count, or -1 for none", c.Prompt))
	}
	errs = append(errs, fielderr.In(c.RetryAfter.Validate(), "RetryAfter"))
	return errors.Join(errs...)
}

// Outbox commits action sets and delivers them.
type Outbox struct {
	cfg     Config
	pool    *pgxpool.Pool
	ledger  *ledger.Ledger
	queries *dbsqlc.Queries
	metrics Metrics
	commit  *ledger.Committer
	prompt  *prompter // nil: every delivery goes to a River job
}

// New returns an Outbox. Its dispatcher, queue and deadline sweep are
// added to a River client by the caller (AddWorkers, Queues,
// PeriodicJobs); what inserts jobs (Commit, Retry) is given that client.
// A cfg that does not validate (Config.Validate) is refused, the error
// naming each field at fault.
func New(cfg Config, pool *pgxpool.Pool, l *ledger.Ledger) (*Outbox, error) {
	if cfg.Clock == nil && l != nil {
		cfg.Clock = l.Clock()
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbox config: %w", err)
	}
	o := &Outbox{cfg: cfg, pool: pool, ledger: l, queries: dbsqlc.New(), metrics: cmp.Or[Metrics](cfg.Metrics, noMetrics{}), commit: cfg.Committer}
	if cfg.Prompt > 0 {
		o.prompt = newPrompter(o, cfg.Prompt)
	}
	if o.commit == nil {
		var err error
		if o.commit, err = ledger.NewCommitter(pool, ledger.CommitConfig{}); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Config returns the configuration, defaults applied.
func (o *Outbox) Config() Config { return o.cfg }

// AddWorkers registers the dispatcher, the deadline sweep and the replay
// workers.
func (o *Outbox) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &deliverWorker{o: o})
	river.AddWorker(w, &sweepWorker{o: o})
	river.AddWorker(w, &adoptWorker{o: o})
	river.AddWorker(w, &replayRecordingWorker{o: o})
	river.AddWorker(w, &replayDeliverWorker{o: o})
}

// Queues are the dispatcher's River queue with its MaxWorkers (Workers)
// and the replay queue with its own (ReplayWorkers): replay work never
// takes a worker of production's deliveries.
func (o *Outbox) Queues() map[string]river.QueueConfig {
	return map[string]river.QueueConfig{Queue: {MaxWorkers: o.cfg.Workers}, ReplayQueue: {MaxWorkers: o.cfg.ReplayWorkers}}
}

// PeriodicJobs are the outbox's periodic jobs: the deadline sweep and the
// adoption of rows without a job (AdoptArgs), each every SweepInterval,
// also on start.
func (o *Outbox) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(o.cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return SweepArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(o.cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return AdoptArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
}

// DeliverArgs delivers one outbox row.
type DeliverArgs struct {
	OutboxID int64 `json:"outbox_id" river:"unique"`
	// Scope is the row's scope as committed, so that a try reads the
	// scope's deferral with the row, in one round trip. It is not part of
	// the unique key (only OutboxID is); a job without it (enqueued by an
	// earlier version) reads the scope after the row.
	Scope string `json:"scope,omitempty"`
}

// Kind is the River job kind.
func (DeliverArgs) Kind() string { return "crm_deliver" }

// InsertOpts: one active delivery job per outbox row, on the crm queue.
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 25, UniqueOpts: riverunique.ByArgs(rivertype.JobStateRetryable)}
}

// ActionSet is a committed action set as stored.
type ActionSet struct {
	ID          int64
	RecordingID uuid.UUID
	crm.ActionSet
}

// CommitResult says what Commit did.
type CommitResult struct {
	Set ActionSet
	// Duplicate: another worker had committed this version first; Set is
	// theirs and nothing was written.
	Duplicate bool
	OutboxIDs []int64
	// Step is the recording's validated -> committed transition that goes
	// with the set (its event names the set's version and id). CommitTx
	// has applied it; PrepareCommitTx leaves it to the caller. Zero on a
	// duplicate.
	Step ledger.Transition
}

// PrepareOpts tells PrepareCommitTx what the caller's transaction will
// write about the recording in the same commit.
type PrepareOpts struct {
	// PendingValidations: validations of the recording (transcribed ->
	// validated events) the caller appends after PrepareCommitTx in the
	// same transaction, not yet in the ledger: the set's version counts
	// them (0 or 1).
	PendingValidations int
}

// Commit writes, in one transaction, the action set (unique on tenant,
// call, version), its outbox row, the River job that delivers it (inserted
// with client), and the recording's validated -> committed transition with
// its event. A second
// worker reaching the same commit meets the uniqueness conflict, counts it
// (duplicate_key_conflicts) and converges on the committed row.
func (o *Outbox) Commit(ctx context.Context, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action) (CommitResult, error) {
	var res CommitResult
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		var err error
		res, err = o.CommitTx(ctx, tx, client, rec, actions)
		return err
	})
	if err != nil {
		return CommitResult{}, err
	}
	return res, nil
}

// CommitTx is Commit inside the caller's transaction: the action set, its
// outbox row, the delivery job and the transition commit or roll back with
// the caller's other writes. On a duplicate it writes only the conflict
// count (which rolls back with the caller's transaction too).
func (o *Outbox) CommitTx(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action) (CommitResult, error) {
	res, err := o.PrepareCommitTx(ctx, tx, client, rec, actions, PrepareOpts{})
	if err != nil || res.Duplicate {
		return res, err
	}
	if _, err := o.ledger.TransitionTx(ctx, tx, res.Step); err != nil {
		return res, err
	}
	return res, nil
}

// PrepareCommitTx is CommitTx without the recording's transition: it
// writes the action set, its outbox row and the delivery job in tx and
// returns the validated -> committed transition (CommitResult.Step) for
// the caller to apply in the same transaction, together with its own
// moves of the recording (a pipeline step that receives, validates and
// commits a transcript updates the recording once: ledger.AdvanceTx). A
// transaction that commits without applying Step leaves an action set
// beside a recording that is not committed: the caller must apply it or
// roll back.
func (o *Outbox) PrepareCommitTx(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action, opts PrepareOpts) (CommitResult, error) {
	var res CommitResult
	now := pgtime.Write(o.cfg.Clock.Now())
	version, err := o.nextVersion(ctx, tx, rec)
	if err != nil {
		return res, fmt.Errorf("numbering the action set of %s: %w", rec.CallID, err)
	}
	version += opts.PendingValidations
	set := crm.ActionSet{TenantID: rec.TenantID, CallID: rec.CallID, ActionVersion: version, RecordingSHA256: rec.AudioSHA256,
		CommittedAt: now, Actions: actions}
	body, err := json.Marshal(actions)
	if err != nil {
		return res, fmt.Errorf("storing action set: %w", err)
	}
	id, err := o.queries.ActionSetInsert(ctx, tx, dbsqlc.ActionSetInsertParams{
		RecordingID: rec.ID, TenantID: rec.TenantID, CallID: rec.CallID, ActionVersion: int32(version),
		RecordingSha256: rec.AudioSHA256, Actions: body, CommittedAt: now,
	})
	if err = translate(err); errors.Is(err, ErrNotFound) {
		// ON CONFLICT DO NOTHING: another worker committed this version
		// first (the insert waited for its transaction to end).
		if err := o.queries.CounterAdd(ctx, tx, dbsqlc.CounterAddParams{Name: CounterDuplicateKeyConflicts, Delta: 1}); err != nil {
			return res, fmt.Errorf("counting a duplicate commit: %w", translate(err))
		}
		o.cfg.Logger.Info("action set already committed by another worker; converging", slog.String("recording_id", rec.ID.String()),
			slog.String("tenant", rec.TenantID), slog.String("call_id", rec.CallID), slog.Int("version", version))
		existing, err := o.actionSetByVersion(ctx, tx, rec.TenantID, rec.CallID, version)
		if err != nil {
			return res, err
		}
		return CommitResult{Set: existing, Duplicate: true}, nil
	}
	if err != nil {
		return res, fmt.Errorf("storing action set: %w", err)
	}
	res.Set = ActionSet{ID: id, RecordingID: rec.ID, ActionSet: set}
	if dest, ok := o.cfg.Destinations[rec.TenantID]; ok {
		oid, err := o.queries.OutboxInsert(ctx, tx, dbsqlc.OutboxInsertParams{
			ActionSetID: id, Target: dest.Name, Scope: dest.Scope, IdempotencyKey: set.IdempotencyKey(), At: now,
			Deadline: now.Add(dest.DeliveryDeadline), ReceivedAt: receivedAt(rec),
		})
		if err != nil {
			return res, fmt.Errorf("storing outbox row: %w", translate(err))
		}
		if _, err := client.InsertTx(ctx, tx, DeliverArgs{OutboxID: oid, Scope: dest.Scope}, nil); err != nil {
			return res, fmt.Errorf("enqueueing delivery: %w", err)
		}
		res.OutboxIDs = append(res.OutboxIDs, oid)
	}
	res.Step = ledger.Transition{RecordingID: rec.ID, From: ledger.StateValidated, To: ledger.StateCommitted,
		Reason: fmt.Sprintf("action set v%d committed (%d actions)", version, len(actions)),
		Detail: map[string]any{"action_version": version, "action_set_id": id}}
	return res, nil
}

// CommitStep is PrepareCommitTx in the shape of the pipeline's commit
// (jobs.CommitFunc: Deps.Commit = o.CommitStep): it returns the validated
// -> committed transition to apply, and whether the commit converged on
// another worker's set.
func (o *Outbox) CommitStep(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action,
	pendingValidations int) (ledger.Transition, bool, error) {
	res, err := o.PrepareCommitTx(ctx, tx, client, rec, actions, PrepareOpts{PendingValidations: pendingValidations})
	return res.Step, res.Duplicate, err
}

// ErrCommitFirst is what a queued commit's finish returns when the set's
// version was committed first (by another worker, or by another of the
// call's recordings): the step's group is written again, step by step,
// and the pipeline's commit then converges through CommitStep.
var ErrCommitFirst = errors.New("the action set's version was committed first; converging step by step")

// QueueCommitStep is CommitStep as a queued step's statements
// (ledger.Committer.CommitQueued): the set is numbered, stored and given
// its outbox row in one statement queued on q; its delivery job goes to
// the group's tail, inserted with every other delivery job of the group
// in one InsertManyTx. The returned finish gives the validated ->
// committed transition to apply (with the step's other moves, queued in
// the group's next round); ErrCommitFirst when the version was committed
// first (nothing of the step is kept: the caller's CommitFunc handles
// that case).
func (o *Outbox) QueueCommitStep(q *ledger.Queue, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action,
	pendingValidations int) func(ctx context.Context, tx pgx.Tx, batchErr error) (ledger.Transition, error) {
	now := pgtime.Write(o.cfg.Clock.Now())
	body, err := json.Marshal(actions)
	if err != nil {
		return func(context.Context, pgx.Tx, error) (ledger.Transition, error) {
			return ledger.Transition{}, fmt.Errorf("storing action set: %w", err)
		}
	}
	p := dbsqlc.ActionSetCommitParams{RecordingID: rec.ID, TenantID: rec.TenantID, CallID: rec.CallID,
		PendingValidations: int32(pendingValidations), RecordingSha256: rec.AudioSHA256, Actions: body, CommittedAt: now,
		ReceivedAt: receivedAt(rec)}
	dest, withDest := o.cfg.Destinations[rec.TenantID]
	if withDest {
		p.Target, p.Scope, p.Deadline = &dest.Name, &dest.Scope, now.Add(dest.DeliveryDeadline)
	}
	var row dbsqlc.ActionSetCommitRow
	var qerr error
	dbsqlc.QueueActionSetCommit(q.Batch, p, func(r dbsqlc.ActionSetCommitRow, err error) { row, qerr = r, err })
	jobs := q.Tail(deliverTailKey{client}, func() ledger.Tail { return &deliverTail{client: client, o: o, told: q.Told()} }).(*deliverTail)
	return func(_ context.Context, _ pgx.Tx, batchErr error) (ledger.Transition, error) {
		if qerr == nil && batchErr != nil {
			qerr = batchErr // the statement's answer never came
		}
		if qerr = translate(qerr); errors.Is(qerr, ErrNotFound) {
			return ledger.Transition{}, ErrCommitFirst
		}
		if qerr != nil {
			return ledger.Transition{}, fmt.Errorf("storing action set: %w", qerr)
		}
		if withDest != (row.OutboxID != nil) {
			return ledger.Transition{}, fmt.Errorf("storing action set %d: outbox row %v for destination %v", row.ID, row.OutboxID, withDest)
		}
		if row.Delivery != nil {
			jobs.rows = append(jobs.rows, *row.Delivery)
		}
		version := int(row.ActionVersion)
		return ledger.Transition{RecordingID: rec.ID, From: ledger.StateValidated, To: ledger.StateCommitted,
			Reason: fmt.Sprintf("action set v%d committed (%d actions)", version, len(actions)),
			Detail: map[string]any{"action_version": version, "action_set_id": row.ID}}, nil
	}
}

// deliverTailKey keys a group's deliverTail by the client that inserts
// its jobs.
type deliverTailKey struct{ client *river.Client[pgx.Tx] }

// deliverTail is the delivery jobs of a group's queued commits, inserted
// with one statement after the group's last round.
type deliverTail struct {
	client *river.Client[pgx.Tx]
	o      *Outbox
	told   bool                          // the group tells it how it ended (ledger.OutcomeTail)
	rows   []dbsqlc.OutboxDeliveryGetRow // as the commit returned them
	prompt []dbsqlc.OutboxDeliveryGetRow // tried once the group committed, each on a reserved place
}

func (t *deliverTail) Run(ctx context.Context, tx pgx.Tx) error {
	var params []river.InsertManyParams
	for _, d := range t.rows {
		if t.told && t.o.prompt != nil && t.o.prompt.reserve() {
			t.prompt = append(t.prompt, d)
			continue
		}
		params = append(params, river.InsertManyParams{Args: DeliverArgs{OutboxID: d.ID, Scope: d.Scope}})
	}
	if len(params) == 0 {
		return nil
	}
	if _, err := t.client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("enqueueing %d deliveries: %w", len(params), err)
	}
	return nil
}

// Committed starts the prompt tries of the group's rows.
func (t *deliverTail) Committed() {
	for _, d := range t.prompt {
		t.o.prompt.start(t.client, d)
	}
	t.prompt = nil
}

// Abandoned gives back the places of the prompt tries: the rows were not
// committed (or may not have been: then the orphan sweep takes them).
func (t *deliverTail) Abandoned() {
	for range t.prompt {
		t.o.prompt.unreserve()
	}
	t.prompt = nil
}

// nextVersion numbers a recording's next action set: one version per
// validation of the recording, after the versions the call's other
// recordings (other audio digests) committed.
func (o *Outbox) nextVersion(ctx context.Context, tx pgx.Tx, rec ledger.Recording) (int, error) {
	others, err := o.queries.ActionSetCountOtherRecordings(ctx, tx, dbsqlc.ActionSetCountOtherRecordingsParams{
		TenantID: rec.TenantID, CallID: rec.CallID, RecordingID: rec.ID,
	})
	if err != nil {
		return 0, translate(err)
	}
	validations, err := o.ledger.ValidationsTx(ctx, tx, rec.ID)
	if err != nil {
		return 0, err
	}
	return int(others) + validations, nil
}

// ActionSetByVersion reads one committed action set, or ErrNotFound.
func (o *Outbox) ActionSetByVersion(ctx context.Context, tenantID, callID string, version int) (ActionSet, error) {
	return o.actionSetByVersion(ctx, o.pool, tenantID, callID, version)
}

func (o *Outbox) actionSetByVersion(ctx context.Context, db dbsqlc.DBTX, tenantID, callID string, version int) (ActionSet, error) {
	s, err := o.queries.ActionSetGetByVersion(ctx, db, dbsqlc.ActionSetGetByVersionParams{
		TenantID: tenantID, CallID: callID, ActionVersion: int32(version),
	})
	if err != nil {
		return ActionSet{}, fmt.Errorf("reading action set %s:%s:%d: %w", tenantID, callID, version, translate(err))
	}
	return actionSetFrom(s)
}

// actionSetFrom converts an action_sets row.
func actionSetFrom(r dbsqlc.ActionSet) (ActionSet, error) {
	s := ActionSet{ID: r.ID, RecordingID: r.RecordingID, ActionSet: crm.ActionSet{
		TenantID: r.TenantID, CallID: r.CallID, ActionVersion: int(r.ActionVersion), RecordingSHA256: r.RecordingSha256,
		CommittedAt: r.CommittedAt.UTC(),
	}}
	if err := json.Unmarshal(r.Actions, &s.Actions); err != nil {
		return ActionSet{}, fmt.Errorf("reading action set %d: %w", r.ID, err)
	}
	return s, nil
}

// Counter reads an operator counter such as CounterDuplicateKeyConflicts.
func (o *Outbox) Counter(ctx context.Context, name string) (int64, error) {
	n, err := o.queries.CounterGet(ctx, o.pool, name)
	if err != nil {
		return 0, fmt.Errorf("reading counter %s: %w", name, translate(err))
	}
	return n, nil
}

// Counters lists every operator counter and gauge by name.
func (o *Outbox) Counters(ctx context.Context) (map[string]int64, error) {
	rows, err := o.queries.CounterList(ctx, o.pool)
	if err != nil {
		return nil, fmt.Errorf("listing counters: %w", translate(err))
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Value
	}
	return out, nil
}
