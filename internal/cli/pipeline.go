package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

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

// openPipeline connects to the configured (lasting) database and builds
// the pipeline and a River client for it.
func (a *app) openPipeline(ctx context.Context) (*pipelineEnv, error) {
	if a.config.DatabaseURL == "" {
		return nil, errNoDatabase
	}
	pool, err := connect(ctx, a.config.DatabaseURL)
	if err != nil {
		return nil, err
	}
	return a.pipelineOn(ctx, pool)
}

func (a *app) pipelineOn(ctx context.Context, pool *pgxpool.Pool) (*pipelineEnv, error) {
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
	e.pipeline, err = jobs.New(cfg, pool, e.ledger, e.store, nil)
	if err != nil {
		return nil, err
	}
	dests := map[string]outbox.Destination{}
	for id, t := range e.pipeline.Config().Tenants {
		if t.CRM.Kind == "" {
			continue
		}
		tgt, err := connector.New(t.CRM.Target())
		if err != nil {
			return nil, fmt.Errorf("pipeline.tenants.%s.crm: %w", id, err)
		}
		dests[id] = outbox.Destination{Name: t.CRM.Kind, Scope: t.CRM.Scope, Target: tgt}
	}
	e.outbox = outbox.New(outbox.Config{Destinations: dests, RetryAfter: a.config.RetryAfter.Policy(), Logger: a.logger,
		ProbeWait: cfg.ProbeWait, ProbeTimeout: cfg.ProbeTimeout}, pool, e.ledger)
	e.pipeline.SetOutbox(e.outbox, nil)
	e.client, err = e.pipeline.NewClient(pool, nil)
	if err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}
