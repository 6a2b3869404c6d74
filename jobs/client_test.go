package jobs_test

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/outbox"
)

// newClient builds a River client as cmd/callscribe does: p's workers,
// queues and periodic sweep and, when ob is not nil, the outbox's
// dispatcher and queue. adjust, when not nil, changes the configuration
// before the client is built.
func newClient(pool *pgxpool.Pool, p *jobs.Pipeline, ob *outbox.Outbox, adjust func(*river.Config)) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	p.AddWorkers(workers)
	queues := p.Queues()
	if ob != nil {
		ob.AddWorkers(workers)
		for name, q := range ob.Queues() {
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

// commitThrough commits validated recordings through ob.
func commitThrough(ob *outbox.Outbox) jobs.CommitFunc { return ob.CommitStep }
