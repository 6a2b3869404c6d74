package jobstest

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/jobs"
)

// Service is more River work for the client NewClient builds: its
// workers and queues (*outbox.Outbox's dispatcher and queues).
type Service interface {
	AddWorkers(w *river.Workers)
	Queues() map[string]river.QueueConfig
}

// NewClient builds a River client as cmd/callscribe does: p's workers,
// queues and periodic sweep and, when svc is not nil, svc's workers and
// queues (the outbox's dispatcher and queue). Pass a nil Service, not a
// nil *outbox.Outbox: an interface holding a nil pointer is not nil. adjust, when not nil,
// changes the configuration before the client is built. It fetches more
// often than River's defaults, for tests.
func NewClient(pool *pgxpool.Pool, p *jobs.Pipeline, svc Service, adjust func(*river.Config)) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	p.AddWorkers(workers)
	queues := p.Queues()
	if svc != nil {
		svc.AddWorkers(workers)
		for name, q := range svc.Queues() {
			queues[name] = q
		}
	}
	cfg := &river.Config{
		Queues:               queues,
		Workers:              workers,
		PeriodicJobs:         p.PeriodicJobs(),
		Logger:               p.Config().Logger,
		FetchCooldown:        20 * time.Millisecond,
		FetchPollInterval:    100 * time.Millisecond,
		JobTimeout:           p.Config().StepTimeout,
		RescueStuckJobsAfter: p.Config().RescueAfter,
	}
	if adjust != nil {
		adjust(cfg)
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}
