package cli

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

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// pipelineEnv is what the pipeline commands run against.
type pipelineEnv struct {
	pool     *pgxpool.Pool
	ledger   *ledger.Ledger
	store    *audio.Store
	pipeline *jobs.Pipeline
	outbox   *outbox.Outbox
	client   *river.Client[pgx.Tx]
}

func (e *pipelineEnv) Close() {
	if e.store != nil {
		_ = e.store.Close()
	}
	if e.pool != nil {
		e.pool.Close()
	}
}

// pipelineCaps is the shared capacity a pipeline works with; the zero
// value is none.
type pipelineCaps struct {
	// slots: the vendor concurrency shared with live calls.
	slots jobs.Slots
	// windows: the scopes' concurrency windows.
	windows *capacity.Windows
	// metrics: what the pipeline and the outbox record (newMetrics); nil:
	// nothing.
	metrics *metrics.Metrics
	// queues: the River queues this process works (nil: every queue of
	// the pipeline and the outbox); `replay --wait` works the replay
	// queue only.
	queues []string
}

// openPipeline connects to the configured (lasting) database and builds
// the pipeline, the outbox and a River client running both, with caps.
func (a *app) openPipeline(ctx context.Context, caps pipelineCaps) (*pipelineEnv, error) {
	if a.config.DatabaseURL == "" {
		return nil, errNoDatabase
	}
	pool, err := connectWorkers(ctx, a.config.DatabaseURL, a.logger, a.poolSize())
	if err != nil {
		return nil, err
	}
	return a.pipelineOn(ctx, pool, caps)
}

// pipelineOn wires the pipeline's parts on pool: the ledger, the
// recordings store, the outbox with each tenant's CRM, the pipeline, and
// the River client that runs the workers of both.
func (a *app) pipelineOn(ctx context.Context, pool *pgxpool.Pool, caps pipelineCaps) (*pipelineEnv, error) {
	e := &pipelineEnv{pool: pool}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	var err error
	e.ledger, err = ledger.New(pool, &ledger.Config{Logger: a.logger, Retention: a.config.Ledger.Retention})
	if err != nil {
		return nil, err
	}
	root := a.config.Audio.Root
	if root == "" {
		if root, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	e.store, err = audio.Open(ctx, audio.Config{URL: root, MaxBytes: a.config.Audio.MaxBytes})
	if err != nil {
		return nil, fmt.Errorf("audio.root: %w", err)
	}
	cfg := a.config.PipelineConfig()
	cfg.Logger = a.logger
	dests := map[string]outbox.Destination{}
	for id, c := range a.config.TenantCRMs() {
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
	replayTargets, err := a.replayTargets()
	if err != nil {
		return nil, err
	}
	obCfg := outbox.Config{Destinations: dests, RetryAfter: a.config.RetryAfter.Policy(), Logger: a.logger,
		ProbeWait: cfg.ProbeWait, ProbeTimeout: cfg.ProbeTimeout, Window: caps.windows, AdmissionMaxAge: cfg.AdmissionMaxAge,
		SweepInterval: timing.SweepInterval, SweepGrace: timing.StepTimeout, ReplayTargets: replayTargets,
		ReplayWorkers: a.config.Replay.Workers, ReplayChunk: a.config.Replay.Chunk,
		// An unfinished recording of a replay run is re-ingested by its
		// business key (converging on its row).
		Reingest: func(ctx context.Context, r ledger.Recording) error {
			_, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: r.TenantID, CallID: r.CallID, Audio: r.AudioURI,
				Lane: r.Lane, Model: r.Model, Language: r.Language, StartedAt: r.StartedAt})
			return err
		}}
	deps := jobs.Deps{Store: e.store, Slots: caps.slots, Window: caps.windows, PlanLimit: a.planLimit}
	if caps.metrics != nil {
		obCfg.Metrics, deps.Metrics = caps.metrics, caps.metrics
	}
	e.outbox = outbox.New(obCfg, pool, e.ledger)
	deps.Commit = e.outbox.CommitStep
	e.pipeline, err = jobs.New(pool, e.ledger, cfg, deps)
	if err != nil {
		return nil, err
	}
	e.client, err = newRiverClient(pool, a.logger, e.pipeline, e.outbox, caps.queues)
	if err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// newRiverClient builds the one River client of a process: the queues,
// workers and periodic jobs of the pipeline and of the outbox; only (when
// not nil) narrows the queues it works, without periodic jobs.
func newRiverClient(pool *pgxpool.Pool, log *slog.Logger, p *jobs.Pipeline, o *outbox.Outbox, only []string) (*river.Client[pgx.Tx], error) {
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
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
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

// quietInfo passes River's warnings and errors, and its info lines only when
// the logger is at debug level: River reports job counts every few seconds.
type quietInfo struct{ slog.Handler }

func (h quietInfo) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelWarn && !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return false
	}
	return h.Handler.Enabled(ctx, l)
}
