package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/extract"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// Pipeline drives recordings from received to validated. It holds no
// per-recording state: everything it knows is in the ledger, so any number
// of processes may run it at once and a killed job resumes where the
// ledger says.
type Pipeline struct {
	cfg       Config
	ledger    *ledger.Ledger
	audio     *audio.Store
	providers map[string]stt.Provider // by tenant
	client    *river.Client[pgx.Tx]
	db        *pgxpool.Pool
	log       *slog.Logger
	outbox    *outbox.Outbox
	extractor crm.Extractor
	slots     Slots
	slotWait  time.Duration
}

// SetOutbox makes the pipeline commit validated recordings: extract their
// actions with ex (nil: extract.RuleExtractor) and commit them through o. Without
// an outbox, recordings stop at validated.
func (p *Pipeline) SetOutbox(o *outbox.Outbox, ex crm.Extractor) {
	if ex == nil {
		ex = extract.RuleExtractor{}
	}
	p.outbox, p.extractor = o, ex
}

func (p *Pipeline) pool() *pgxpool.Pool { return p.db }

// New builds a pipeline. providers overrides the vendor of a tenant (tests
// point tenants at a simulator this way); tenants not in it get an adapter
// built from their configuration.
func New(cfg Config, pool *pgxpool.Pool, l *ledger.Ledger, store *audio.Store, providers map[string]stt.Provider) (*Pipeline, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, db: pool, ledger: l, audio: store, providers: map[string]stt.Provider{}, log: cfg.Logger}
	for id, t := range cfg.Tenants {
		if prov, ok := providers[id]; ok {
			p.providers[id] = prov
			continue
		}
		prov, err := stt.New(t.Provider, stt.Config{BaseURL: t.BaseURL, APIKey: t.APIKey, Model: t.Model})
		if err != nil {
			return nil, fmt.Errorf("pipeline.tenants.%s: %w", id, err)
		}
		p.providers[id] = prov
	}
	return p, nil
}

// Config returns the pipeline's configuration, defaults applied.
func (p *Pipeline) Config() Config { return p.cfg }

// AddWorkers registers the pipeline's River workers.
func (p *Pipeline) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &transcribeWorker{p: p})
	river.AddWorker(w, &sweepWorker{p: p})
}

// RiverConfig returns a River configuration with the pipeline's queues,
// workers and periodic sweep. The caller may adjust it before building the
// client.
func (p *Pipeline) RiverConfig() *river.Config {
	workers := river.NewWorkers()
	p.AddWorkers(workers)
	queues := map[string]river.QueueConfig{
		QueueImmediate: {MaxWorkers: p.cfg.ImmediateWorkers},
		QueueBatch:     {MaxWorkers: p.cfg.BatchWorkers},
	}
	if p.outbox != nil {
		p.outbox.AddWorkers(workers)
		queues[outbox.Queue] = river.QueueConfig{MaxWorkers: p.outbox.Config().Workers}
	}
	return &river.Config{
		Queues:  queues,
		Workers: workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(p.cfg.SweepInterval),
				func() (river.JobArgs, *river.InsertOpts) { return SweepArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		},
		Logger:               slog.New(quietInfo{p.log.Handler()}),
		FetchCooldown:        20 * time.Millisecond,
		FetchPollInterval:    250 * time.Millisecond,
		JobTimeout:           p.cfg.StepTimeout,
		RescueStuckJobsAfter: p.cfg.RescueAfter,
	}
}

// SetClient gives the pipeline the River client it inserts jobs with.
func (p *Pipeline) SetClient(c *river.Client[pgx.Tx]) { p.client = c }

// NewClient builds the River client for pool with the pipeline's
// configuration and keeps it for inserts.
func (p *Pipeline) NewClient(pool *pgxpool.Pool, adjust func(*river.Config)) (*river.Client[pgx.Tx], error) {
	cfg := p.RiverConfig()
	if adjust != nil {
		adjust(cfg)
	}
	c, err := newRiverClient(pool, cfg)
	if err != nil {
		return nil, err
	}
	p.client = c
	if p.outbox != nil {
		p.outbox.SetClient(c)
	}
	return c, nil
}

// Stop stops a River client the way SIGTERM should: stop fetching, let
// running steps finish within the shutdown grace, then cancel them. Work
// cut short resumes from the ledger on the next start.
func (p *Pipeline) Stop(ctx context.Context, c *river.Client[pgx.Tx]) error {
	soft, cancel := context.WithTimeout(ctx, p.cfg.ShutdownGrace)
	defer cancel()
	err := c.Stop(soft)
	if err == nil {
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	p.log.Warn("running steps did not finish within the shutdown grace; cancelling them", slog.Duration("grace", p.cfg.ShutdownGrace))
	hard, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel2()
	return c.StopAndCancel(hard)
}

type transcribeWorker struct {
	river.WorkerDefaults[TranscribeArgs]
	p *Pipeline
}

func (w *transcribeWorker) Work(ctx context.Context, job *river.Job[TranscribeArgs]) error {
	return w.p.drive(ctx, job.ID, job.Args.RecordingID)
}

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	p *Pipeline
}

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.p.Sweep(ctx)
	return err
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
