package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/stackgrow"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// Pipeline is what the pipeline commands run against.
type Pipeline struct {
	Pool   *pgxpool.Pool
	Ledger *ledger.Ledger
	Store  *audio.Store
	Jobs   *jobs.Pipeline
	Outbox *outbox.Outbox
	Client *river.Client[pgx.Tx]
}

func (e *Pipeline) Close() {
	if e.Store != nil {
		_ = e.Store.Close()
	}
	if e.Pool != nil {
		e.Pool.Close()
	}
}

// Caps is the shared capacity a pipeline works with; the zero
// value is none.
type Caps struct {
	// Slots: the vendor concurrency shared with live calls.
	Slots jobs.Slots
	// Windows: the scopes' concurrency Windows.
	Windows *capacity.Windows
	// Metrics: what the pipeline and the outbox record (newMetrics); nil:
	// nothing.
	Metrics *metrics.Metrics
	// Queues: the River Queues this process works (nil: every queue of
	// the pipeline and the outbox); `replay --wait` works the replay
	// queue only.
	Queues []string
}

// OpenPipeline connects to the configured (lasting) database and builds
// the pipeline, the outbox and a River client running both, with caps.
func (a *App) OpenPipeline(ctx context.Context, caps Caps) (*Pipeline, error) {
	if a.Config.DatabaseURL == "" {
		return nil, ErrNoDatabase
	}
	pool, err := ConnectWorkers(ctx, a.Config.DatabaseURL, a.Logger, a.PoolSize())
	if err != nil {
		return nil, err
	}
	return a.PipelineOn(ctx, pool, caps)
}

// PipelineOn wires the pipeline's parts on pool: the ledger, the
// recordings store, the outbox with each tenant's CRM, the pipeline, and
// the River client that runs the workers of both.
func (a *App) PipelineOn(ctx context.Context, pool *pgxpool.Pool, caps Caps) (*Pipeline, error) {
	e := &Pipeline{Pool: pool}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	var err error
	lc := a.Config.Ledger
	lc.Logger = a.Logger
	e.Ledger, err = ledger.New(pool, &lc)
	if err != nil {
		return nil, err
	}
	root := a.Config.Audio.URL
	if root == "" {
		if root, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	e.Store, err = audio.Open(ctx, audio.Config{URL: root, MaxBytes: a.Config.Audio.MaxBytes})
	if err != nil {
		return nil, fmt.Errorf("audio.root: %w", err)
	}
	cfg := a.Config.PipelineConfig()
	cfg.Logger = a.Logger
	dests := map[string]outbox.Destination{}
	for id, c := range a.Config.TenantCRMs() {
		tgt, err := connector.New(c.Config)
		if err != nil {
			return nil, fmt.Errorf("pipeline.tenants.%s.crm: %w", id, err)
		}
		dests[id] = outbox.Destination{Name: c.Kind, Scope: c.Scope, Target: tgt, DeliveryDeadline: c.DeliveryDeadline}
	}
	// The outbox's deadline sweep runs as often as the pipeline's, and
	// leaves a row alone for a job run's limit after its deadline, so that
	// a try begun before it can record the CRM's answer.
	timing := cfg.WithDefaults()
	replayTargets, err := a.ReplayTargets()
	if err != nil {
		return nil, err
	}
	obCfg := outbox.Config{Destinations: dests, RetryAfter: a.Config.RetryAfter, Logger: a.Logger,
		ProbeWait: cfg.ProbeWait, ProbeTimeout: cfg.ProbeTimeout, Window: caps.Windows, AdmissionMaxAge: cfg.AdmissionMaxAge,
		SweepInterval: timing.SweepInterval, SweepGrace: timing.StepTimeout, ReplayTargets: replayTargets,
		ReplayWorkers: a.Config.Replay.Workers, ReplayChunk: a.Config.Replay.Chunk,
		// One committer for the process: the outbox's tries and
		// settlements share groups with the pipeline's steps.
		Committer: e.Ledger.Committer(),
		// An unfinished recording of a replay run is re-ingested by its
		// business key (converging on its row).
		Reingest: func(ctx context.Context, r ledger.Recording) error {
			_, err := e.Jobs.Ingest(ctx, e.Client, jobs.IngestRequest{TenantID: r.TenantID, CallID: r.CallID, Audio: r.AudioURI,
				Lane: r.Lane, Model: r.Model, Language: r.Language, StartedAt: r.StartedAt})
			return err
		}}
	deps := jobs.Deps{Store: e.Store, Slots: caps.Slots, Window: caps.Windows, PlanLimit: a.PlanLimit}
	if caps.Metrics != nil {
		obCfg.Metrics, deps.Metrics = caps.Metrics, caps.Metrics
	}
	if e.Outbox, err = outbox.New(obCfg, pool, e.Ledger); err != nil {
		return nil, err
	}
	deps.Commit, deps.QueueCommit, deps.Drain = e.Outbox.CommitStep, e.Outbox.QueueCommitStep, e.Outbox.Drain
	e.Jobs, err = jobs.New(pool, e.Ledger, cfg, deps)
	if err != nil {
		return nil, config.Named(err, "Pipeline")
	}
	e.Client, err = NewRiverClient(pool, a.Logger, e.Jobs, e.Outbox, caps.Queues, caps.Metrics)
	if err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// NewRiverClient builds the one River client of a process: the queues,
// workers and periodic jobs of the pipeline and of the outbox; only (when
// not nil) narrows the queues it works, without periodic jobs; m (when
// not nil) counts the busy workers per queue (worker occupancy).
func NewRiverClient(pool *pgxpool.Pool, log *slog.Logger, p *jobs.Pipeline, o *outbox.Outbox, only []string, m *metrics.Metrics) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	p.AddWorkers(workers)
	o.AddWorkers(workers)
	queues := p.Queues()
	for name, q := range o.Queues() {
		queues[name] = q
	}
	periodic := append(p.PeriodicJobs(), o.PeriodicJobs()...)
	if only != nil {
		maps.DeleteFunc(queues, func(name string, _ river.QueueConfig) bool { return !slices.Contains(only, name) })
		periodic = nil
	}
	cfg := p.Config()
	var middleware []rivertype.Middleware
	if m != nil {
		middleware = append(middleware, m.WorkerMiddleware(queues))
	}
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Hooks:        []rivertype.Hook{&growStack{}},
		Middleware:   middleware,
		Queues:       queues,
		Workers:      workers,
		PeriodicJobs: periodic,
		Logger:       slog.New(quietInfo{log.Handler()}),
		// A queue with free workers and jobs waiting fetches again this
		// soon after its last fetch (pipeline.fetch_cooldown; River's
		// default is 100ms, which caps a queue of 10 workers at 100 jobs
		// a second).
		FetchCooldown: cfg.FetchCooldown,
		// A job woken for a free window slot (JobRetry) or back from a
		// short wait is fetched within this: River notifies on inserts
		// only. 100ms keeps a scope's line moving at a few fetch queries
		// a second per queue.
		FetchPollInterval:    100 * time.Millisecond,
		JobTimeout:           cfg.StepTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		// River's nightly REINDEX needs the tables' owner, and the
		// process acts as the runtime role: off here; the owner runs it
		// (docs/operations.md).
		ReindexerIndexNames: []string{},
	})
}

// growStack grows a job's goroutine stack once as the job begins (River
// runs each job in a goroutine of its own), before its arguments are
// decoded: see internal/stackgrow.
type growStack struct{ river.HookDefaults }

func (*growStack) WorkBegin(context.Context, *rivertype.JobRow) error {
	stackgrow.Grow()
	return nil
}

// quietInfo passes River's warnings and errors, and its info lines only when
// the logger is at debug level: River reports job counts every few seconds.
type quietInfo struct{ slog.Handler }

func (h quietInfo) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelWarn && !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return false
	}
	return h.Handler.Enabled(ctx, l)
}
