package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/internal/stackgrow"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// errNeedsJob: a prompt try met something only a River job can wait for
// (a scope paused, deferred or out for its probe); nothing was tried.
var errNeedsJob = errors.New("the scope is not open: its delivery goes to a River job")

// prompter tries deliveries right after their commit, in this process
// and outside River, at most cap at once. A delivery it cannot finish
// (the scope not open, a wait, an error) goes to a River job, as every
// delivery did before: the job is the cold path, the prompt try the hot
// one.
type prompter struct {
	o      *Outbox
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool // Drain began: no more tries start
}

func newPrompter(o *Outbox, n int) *prompter {
	ctx, cancel := context.WithCancel(context.Background())
	return &prompter{o: o, sem: make(chan struct{}, n), ctx: ctx, cancel: cancel}
}

// reserve takes a place for one prompt try, or reports that all are
// taken or that Drain began (the delivery then goes to a River job in its
// commit).
func (p *prompter) reserve() bool {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return false // drained: every row gets its job, as with Prompt -1
	}
	select {
	case p.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// unreserve gives back a place reserve took that will not be used.
func (p *prompter) unreserve() { <-p.sem }

// start tries outbox row d (as its commit returned it) in a goroutine of
// its own, on a place reserve took.
func (p *prompter) start(client *river.Client[pgx.Tx], d dbsqlc.OutboxDeliveryGetRow) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		// A group that committed after the stop (its caller cancelled):
		// the row waits for the adoption job, as after a crash.
		p.unreserve()
		return
	}
	p.wg.Add(1)
	go func() {
		stackgrow.Grow() // one copy of its stack now, not several deep in the try
		defer p.wg.Done()
		defer p.unreserve()
		p.try(client, d)
	}()
}

// try is one prompt try of row id; what it could not finish goes to a
// River job.
func (p *prompter) try(client *river.Client[pgx.Tx], d dbsqlc.OutboxDeliveryGetRow) {
	o := p.o
	id, scope := d.ID, d.Scope
	err := o.deliverCommitted(p.ctx, d)
	var cancel *rivertype.JobCancelError
	var snooze *rivertype.JobSnoozeError
	var opts river.InsertOpts
	switch {
	case err == nil, errors.As(err, &cancel):
		return
	case errors.As(err, &snooze):
		opts.ScheduledAt = o.cfg.Clock.Now().Add(snooze.Duration)
	case errors.Is(err, errNeedsJob):
	default:
		o.cfg.Logger.Warn("a prompt delivery try failed; its River job takes it over",
			slog.Int64("outbox", id), slog.String("error", err.Error()))
		opts.ScheduledAt = o.cfg.Clock.Now().Add(time.Second)
	}
	ctx, cancelCtx := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
	defer cancelCtx()
	if _, ierr := client.Insert(ctx, DeliverArgs{OutboxID: id, Scope: scope}, &opts); ierr != nil {
		o.cfg.Logger.Error("enqueueing the delivery of a prompt try that did not finish failed; the orphan sweep takes it",
			slog.Int64("outbox", id), slog.String("error", ierr.Error()))
	}
}

// Drain waits for the prompt tries running (their commits are done: a
// stopped River client starts no more) until ctx ends, then cancels them;
// a cancelled try's row goes to a River job, or, if that insert fails
// too, to the orphan sweep (AdoptOrphans). Without prompt tries it
// returns at once.
func (o *Outbox) Drain(ctx context.Context) error {
	if o.prompt == nil {
		return nil
	}
	return o.prompt.close(ctx)
}

func (p *prompter) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		p.cancel()
		<-done
		return ctx.Err()
	}
}

var _ ledger.OutcomeTail = (*deliverTail)(nil)

// orphansSQL lists pending rows that no River job will try: untouched
// since cutoff (a prompt try writes the row within moments of its commit,
// and settles it within its CRM call) and without an active crm_deliver
// job. Written by hand, not by sqlc: it reads River's table, which is not
// part of the outbox's schema.
const orphansSQL = `SELECT o.id, o.scope FROM outbox o
WHERE o.state = 'pending' AND o.updated_at <= $1
  AND NOT EXISTS (SELECT 1 FROM river_job j
    WHERE j.kind = 'crm_deliver' AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
      AND j.args->>'outbox_id' = o.id::text)
ORDER BY o.updated_at, o.id
LIMIT $2`

// AdoptTimeout bounds a run of the adoption (AdoptArgs): one read of at
// most sweepBatch rows and one insert. It is short on purpose: River
// rescues a job whose process died only after the longer of its timeout
// and RescueStuckJobsAfter, and a crash is what leaves rows to adopt, so
// the run the crash cut short must come back soon (the deadline sweep's
// five minutes would hold adoption back that long).
const AdoptTimeout = 30 * time.Second

// AdoptArgs gives pending rows left without a delivery job one
// (AdoptOrphans), every SweepInterval and on start (PeriodicJobs).
type AdoptArgs struct{}

// Kind is the River job kind.
func (AdoptArgs) Kind() string { return "crm_orphan_sweep" }

// InsertOpts: on the crm queue, one at a time.
func (AdoptArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: riverunique.ByArgs()}
}

type adoptWorker struct {
	river.WorkerDefaults[AdoptArgs]
	o *Outbox
}

// Timeout bounds a run of the adoption (AdoptTimeout).
func (w *adoptWorker) Timeout(*river.Job[AdoptArgs]) time.Duration { return AdoptTimeout }

func (w *adoptWorker) Work(ctx context.Context, _ *river.Job[AdoptArgs]) error {
	_, err := w.o.AdoptOrphans(ctx, river.ClientFromContext[pgx.Tx](ctx))
	return err
}

// AdoptOrphans gives a River job to every pending row left without one,
// untouched for OrphanAfter: a row whose prompt try was cut short (its
// process killed or stopped between the commit and the try's outcome),
// or whose job River discarded. It returns how many it enqueued. Its
// periodic job (AdoptArgs) runs it.
func (o *Outbox) AdoptOrphans(ctx context.Context, client *river.Client[pgx.Tx]) (int, error) {
	cutoff := pgtime.Write(o.cfg.Clock.Now().Add(-o.cfg.OrphanAfter))
	rows, err := o.pool.Query(ctx, orphansSQL, cutoff, sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("listing outbox rows without a delivery job: %w", translate(err))
	}
	var params []river.InsertManyParams
	for rows.Next() {
		var a DeliverArgs
		if err := rows.Scan(&a.OutboxID, &a.Scope); err != nil {
			rows.Close()
			return 0, fmt.Errorf("reading outbox rows without a delivery job: %w", err)
		}
		params = append(params, river.InsertManyParams{Args: a})
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("listing outbox rows without a delivery job: %w", translate(err))
	}
	if len(params) == 0 {
		return 0, nil
	}
	// Unique by row: a job enqueued meanwhile is kept, not doubled.
	res, err := client.InsertMany(ctx, params)
	if err != nil {
		return 0, fmt.Errorf("enqueueing the delivery of %d outbox rows without a job: %w", len(params), err)
	}
	n := 0
	for _, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			n++
		}
	}
	if n > 0 {
		o.cfg.Logger.Warn("outbox rows left without a delivery job (a prompt try cut short by a stop or a crash) were given one",
			slog.Int("rows", n), slog.Duration("untouched_for", o.cfg.OrphanAfter))
	}
	return n, nil
}
