package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/extract"
	"github.com/callscribe/callscribe/internal/fielderr"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// Pipeline drives recordings from received to validated, and on to
// committed when it has a Commit. It holds no per-recording state:
// everything it knows is in the ledger, so any number of processes may run
// it at once and a killed job resumes where the ledger says.
type Pipeline struct {
	cfg           Config
	rollout       rolloutModes
	ledger        *ledger.Ledger
	audio         *audio.Store
	providers     map[string]stt.Provider // by tenant
	db            *pgxpool.Pool
	log           *slog.Logger
	commitActions CommitFunc
	queueCommit   QueueCommitFunc
	drainDeps     func(context.Context) error
	extractor     crm.Extractor
	slots         Slots
	slotWait      time.Duration
	window        *capacity.Windows
	planLimitOf   func(provider string) int
	metrics       Metrics
	// zones: the tenants' time zones by name, loaded once.
	zones sync.Map
	// unbatched: scopes whose vendor answered that it offers no batches.
	unbatched unbatchedScopes
	// adopted: AdoptFormerScopes has carried every renamed scope over.
	adopted atomic.Bool
	adoptMu sync.Mutex
	// timeoutCap, when set (by a test), caps every per-kind Timeout.
	timeoutCap time.Duration
}

// Metrics records what the pipeline did, for operators (metrics.Metrics in
// callscribe). Each event is recorded once, by the worker that made it
// happen, after the ledger recorded it.
type Metrics interface {
	// VendorThrottled: a throttled answer (429, or 503 with a timing
	// signal) of provider for scope.
	VendorThrottled(provider, scope string, status int)
	// VendorFailed: a request that failed with outcome (transient,
	// permanent, quota_exhausted).
	VendorFailed(provider, outcome string)
	// VendorCooldown: a throttled answer moved scope's deadline to length
	// from now.
	VendorCooldown(scope string, length time.Duration)
	// BillableAudio: provider transcribed seconds of tenant's audio.
	BillableAudio(provider, tenant string, seconds float64)
	// Committed: a transcript's actions were committed (not a commit that
	// converged on another worker's), after submissions to the vendor and
	// receiptToCommit since ingest.
	Committed(tenant, lane string, submissions int, receiptToCommit time.Duration)
	// AdmissionGap: a request to scope's vendor was sent gap after the
	// scope read that admitted it.
	AdmissionGap(scope string, gap time.Duration)
	// AdmissionRechecked: an admission older than AdmissionMaxAge was read
	// again before sending; refused: the scope said no (the request was
	// withdrawn or its manifest waits).
	AdmissionRechecked(scope string, refused bool)
}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) VendorThrottled(string, string, int)          {}
func (noMetrics) VendorFailed(string, string)                  {}
func (noMetrics) VendorCooldown(string, time.Duration)         {}
func (noMetrics) BillableAudio(string, string, float64)        {}
func (noMetrics) Committed(string, string, int, time.Duration) {}
func (noMetrics) AdmissionGap(string, time.Duration)           {}
func (noMetrics) AdmissionRechecked(string, bool)              {}

// CommitFunc commits a validated recording's actions inside tx: it writes
// the action set and the job that delivers it (inserted with client), and
// returns the recording's validated → committed transition (step) for the
// pipeline to apply in the same transaction together with the step's other
// moves of the recording (a transcript received, validated and committed
// updates the recording once: ledger.AdvanceTx). It does not move the
// recording itself. pendingValidations is how many validations (0 or 1)
// the pipeline appends after it in the same transaction: the set's
// version counts them. duplicate reports that another worker had committed
// the set first and the commit converged on theirs; step is then zero. In
// callscribe it is outbox.Outbox.PrepareCommitTx.
type CommitFunc func(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action,
	pendingValidations int) (step ledger.Transition, duplicate bool, err error)

// QueueCommitFunc is a CommitFunc as a queued step's statements
// (ledger.Committer.CommitQueued): it queues on q what writes the action
// set (its delivery job may go to the group's tail) and returns the
// finish that gives the validated → committed transition once q's batch
// is read. A case it does not handle (a version committed first) is an
// error from finish: the group is then written step by step, and the
// CommitFunc handles it. In callscribe it is
// outbox.Outbox.QueueCommitStep.
type QueueCommitFunc func(q *ledger.Queue, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action,
	pendingValidations int) func(ctx context.Context, tx pgx.Tx, batchErr error) (ledger.Transition, error)

// Deps is what a pipeline works with besides its configuration.
type Deps struct {
	// Store reads the recordings. Required.
	Store *audio.Store
	// Drain waits for the work Commit's side runs outside River (the
	// outbox's prompt delivery tries: outbox.Outbox.Drain) until ctx ends,
	// then cancels it. Stop calls it once the River client stopped.
	// Default nil: nothing to wait for.
	Drain func(ctx context.Context) error
	// Providers overrides the speech vendor of a tenant (tests point
	// tenants at a simulator this way). Default nil: every tenant gets an
	// adapter built from its configuration.
	Providers map[string]stt.Provider
	// Commit commits validated recordings. Default nil: recordings stop at
	// validated.
	Commit CommitFunc
	// QueueCommit is Commit's queued form, used with group commit (the
	// set's statements travel with the group's other steps' in a round
	// trip or two). Default nil: Commit, step by step. It is used only
	// with Commit.
	QueueCommit QueueCommitFunc
	// Extractor finds a transcript's actions before Commit. Default nil:
	// extract.RuleExtractor.
	Extractor crm.Extractor
	// Slots, when set, is the vendor concurrency the pipeline takes a slot
	// of before each submission (a capacity.Leases in callscribe).
	// Default nil: no slots are taken.
	Slots Slots
	// SlotWait is how long a job without a slot snoozes before asking
	// again. Default 0: CapacityWaitDefault.
	SlotWait time.Duration
	// Window, when set, is the scopes' concurrency windows shared by every
	// process (capacity.Windows): each submission takes a slot of its
	// scope's window, waits in line for one, and gives it back with what
	// the vendor answered. Default nil: no window (admission is the
	// scope's deadline and probe only).
	Window *capacity.Windows
	// PlanLimit returns the configured plan limit of a provider's
	// transcriptions (0: none); a scope's window never grows above it.
	// Default nil: none.
	PlanLimit func(provider string) int
	// Metrics records what the pipeline does. Default nil: nothing is
	// recorded.
	Metrics Metrics
}

// New builds a pipeline on pool and l. Its River workers, queues and
// periodic jobs are added to a River client by the caller (AddWorkers,
// Queues, PeriodicJobs); the workers reach that client through their
// context.
func New(pool *pgxpool.Pool, l *ledger.Ledger, cfg Config, deps Deps) (*Pipeline, error) {
	if pool == nil || l == nil || deps.Store == nil {
		return nil, errors.New("jobs.New: the pool, the ledger and Deps.Store are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = l.Clock()
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, db: pool, ledger: l, audio: deps.Store, providers: map[string]stt.Provider{}, log: cfg.Logger,
		commitActions: deps.Commit, queueCommit: deps.QueueCommit, drainDeps: deps.Drain, extractor: deps.Extractor, slots: deps.Slots, slotWait: deps.SlotWait,
		window: deps.Window, planLimitOf: deps.PlanLimit, rollout: rolloutModes{log: cfg.Logger}, metrics: deps.Metrics}
	if p.metrics == nil {
		p.metrics = noMetrics{}
	}
	if p.extractor == nil {
		p.extractor = extract.RuleExtractor{}
	}
	if p.slotWait <= 0 {
		p.slotWait = CapacityWaitDefault
	}
	for id, t := range cfg.Tenants {
		if prov, ok := deps.Providers[id]; ok {
			p.providers[id] = prov
			continue
		}
		prov, err := stt.New(t.Provider, stt.Config{BaseURL: t.BaseURL, AllowInsecureHTTP: t.AllowInsecureHTTP, APIKey: t.APIKey, Model: t.Model})
		if err != nil {
			return nil, fielderr.In(err, "Tenants", fielderr.Key(id))
		}
		p.providers[id] = prov
	}
	return p, nil
}

func (p *Pipeline) pool() *pgxpool.Pool { return p.db }

// Config returns the pipeline's configuration, defaults applied.
func (p *Pipeline) Config() Config { return p.cfg }

// AddWorkers registers the pipeline's River workers.
func (p *Pipeline) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &transcribeWorker{p: p})
	river.AddWorker(w, &sweepWorker{p: p})
	river.AddWorker(w, &retentionWorker{p: p})
	river.AddWorker(w, &formWorker{p: p})
	river.AddWorker(w, &manifestWorker{p: p})
}

// Queues are the pipeline's River queues with their MaxWorkers
// (ImmediateWorkers and BatchWorkers).
func (p *Pipeline) Queues() map[string]river.QueueConfig {
	return map[string]river.QueueConfig{
		QueueImmediate: {MaxWorkers: p.cfg.ImmediateWorkers},
		QueueBatch:     {MaxWorkers: p.cfg.BatchWorkers},
	}
}

// PeriodicJobs are the pipeline's periodic jobs: the deadline sweep every
// SweepInterval, also on start, and the retention purge every
// RetentionEvery.
func (p *Pipeline) PeriodicJobs() []*river.PeriodicJob {
	out := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(p.cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return SweepArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
	if p.cfg.Batch.Manifests {
		out = append(out, river.NewPeriodicJob(river.PeriodicInterval(p.cfg.Batch.FormEvery),
			func() (river.JobArgs, *river.InsertOpts) { return FormManifestsArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	if p.cfg.RetentionEvery > 0 {
		out = append(out, river.NewPeriodicJob(river.PeriodicInterval(p.cfg.RetentionEvery),
			func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil }, nil))
	}
	return out
}

// Stop stops a River client the way SIGTERM should: stop fetching, let
// running steps finish within the shutdown grace, then cancel them. Work
// cut short resumes from the ledger on the next start.
func (p *Pipeline) Stop(ctx context.Context, c *river.Client[pgx.Tx]) error {
	soft, cancel := context.WithTimeout(ctx, p.cfg.ShutdownGrace)
	defer cancel()
	err := c.Stop(soft)
	if err == nil {
		return p.drain(soft)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	p.log.Warn("running steps did not finish within the shutdown grace; cancelling them", slog.Duration("grace", p.cfg.ShutdownGrace))
	hard, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel2()
	return errors.Join(c.StopAndCancel(hard), p.drain(hard))
}

// drain waits for Deps.Drain within ctx.
func (p *Pipeline) drain(ctx context.Context) error {
	if p.drainDeps == nil {
		return nil
	}
	if err := p.drainDeps(ctx); err != nil {
		p.log.Warn("prompt deliveries did not finish within the shutdown grace; cancelled (the outbox sweep gives their rows a job)", slog.String("error", err.Error()))
	}
	return nil
}

type transcribeWorker struct {
	river.WorkerDefaults[TranscribeArgs]
	p *Pipeline
}

func (w *transcribeWorker) Work(ctx context.Context, job *river.Job[TranscribeArgs]) error {
	return w.p.drive(ctx, job.ID, job.Args.RecordingID, job.Args.TenantID)
}

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	p *Pipeline
}

// Timeout bounds a run of the sweep (SweepTimeout).
func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration {
	return w.p.jobTimeout(SweepTimeout)
}

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.p.Sweep(ctx)
	return err
}
