package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/fielderr"
)

// Group commit defaults (CommitConfig).
const (
	CommitMaxItemsDefault = 32
	// commitGroupTimeout bounds one group's transaction.
	commitGroupTimeout = 30 * time.Second
)

// CommitFlushersDefault is CommitConfig.Flushers' default: half the
// process's CPUs (GOMAXPROCS), at least 2 and at most 64. With one, every
// step waits while the group before it is written (its round trips and its
// commit's WAL flush), so a CPU-bound two-core host sat 16 % idle with all
// its workers waiting in line; a second group under way while the first
// commits took the rate from 353 to 407 recordings/s on average (five
// interleaved 10,000-recording pairs, make bench), for 3.2 commits per
// recording instead of 2.95. More than two on two cores added commits and
// no rate. A host with more cores keeps more groups under way, so that one
// group's commit never caps the process.
func CommitFlushersDefault() int { return min(max(runtime.GOMAXPROCS(0)/2, 2), 64) }

// CommitConfig configures group commit: the short transactions of many
// workers of one process (a submission recorded, a transcript committed
// with its action set and delivery, a delivery's try and its settlement)
// are gathered into one transaction, so that many recordings' steps share
// one commit. The yaml keys are those of the ledger section's
// group_commit.
type CommitConfig struct {
	// MaxItems is the most steps one group transaction holds. Default
	// CommitMaxItemsDefault (32); 1 turns group commit off: every step
	// commits alone, as it would without a committer.
	MaxItems int `yaml:"max_items"`
	// Flushers is how many group transactions may be under way at once
	// (each holds one connection while it runs). A step that arrives
	// while a group is being written waits for the next. Default
	// CommitFlushersDefault(): half the process's CPUs, at least 2.
	Flushers int `yaml:"flushers"`
	// Linger is how long a group waits for more steps before it is
	// written with fewer than MaxItems. Default 0: a group is written as
	// soon as a flusher is free; groups grow only while the database is
	// busy, so a quiet process pays no wait.
	Linger time.Duration `yaml:"linger"`
}

// WithDefaults returns c with every zero field set to its default.
func (c CommitConfig) WithDefaults() CommitConfig {
	c.MaxItems = cmp.Or(c.MaxItems, CommitMaxItemsDefault)
	c.Flushers = cmp.Or(c.Flushers, CommitFlushersDefault())
	return c
}

// Validate reports every problem with c, each a *fielderr.Error naming
// the field.
func (c CommitConfig) Validate() error {
	var errs []error
	if c.MaxItems < 0 || c.MaxItems > 1000 {
		errs = append(errs, fielderr.Errorf("MaxItems", "%d must be between 1 and 1000", c.MaxItems))
	}
	if c.Flushers < 0 || c.Flushers > 64 {
		errs = append(errs, fielderr.Errorf("Flushers", "%d must be between 1 and 64", c.Flushers))
	}
	if c.Linger < 0 || c.Linger > time.Second {
		errs = append(errs, fielderr.Errorf("Linger", "%s must be between 0 and 1s", c.Linger))
	}
	return errors.Join(errs...)
}

// CommitFunc is one step's writes, run inside a group's transaction. It
// writes only through tx and sets what it returns to its caller by
// assignment: it may run twice (once in a group that rolled back, then
// alone), and only the last run counts.
type CommitFunc func(ctx context.Context, tx pgx.Tx) error

// QueueFunc is a step whose statements need no answer from one another:
// it queues them on q.Batch and returns the step's finish, run once the
// batch's results have been read. A group sends every queued step's
// statements in one round trip (a pgx.Batch on its transaction) after its
// other steps. A step whose later statements need the answers of its
// earlier ones queues them from its finish with q.Then: they travel in
// the group's next round trip, with the other steps' second statements.
// Work the steps of a group share (the delivery jobs of every step,
// inserted with one statement) goes to q.Tail, run once after the last
// round. Like a CommitFunc a queued step may run twice, and only the last
// run counts.
type QueueFunc func(q *Queue) FinishFunc

// FinishFunc reads a queued step's answers (batchErr is the batch's: a
// statement the database refused, or the connection) and decides the
// step's outcome as a CommitFunc does: nil, a WroteNothing error, or an
// error. It may run more statements on tx. The outcome of a step that
// queued a next round (Queue.Then) is that round's.
type FinishFunc func(ctx context.Context, tx pgx.Tx, batchErr error) error

// Queue is where a queued step puts its statements: Batch, sent with the
// other queued steps' of the group in one round trip.
type Queue struct {
	Batch *pgx.Batch
	run   *queueRun
	round *queueRound
	then  QueueFunc
}

// A Merged is one statement that the queued steps of a round share: each
// step adds its item to it (Queue.Merged) instead of queuing a statement of
// its own, and the round queues the statement once on its batch, after
// every step of the round has queued (so after the steps' own statements).
// Its answers reach each item's step before that step's finish runs. A
// group's steps of one kind (the recordings' moves, the deliveries' tries)
// so cost the database one statement, its fixed costs and its statement
// guards once, instead of one per step.
type Merged interface {
	// Queue puts the statement on b and returns how many steps' items it
	// holds; it is called once, when the round's steps have all queued.
	// With few items it may queue each item's own one-row statement
	// instead, and return 0: none was merged.
	Queue(b *pgx.Batch) int
}

// QueueMerged queues the item p of the step queuing on q, whose row is
// id, merged under key with the round's other items of the kind into one
// statement (Merged): many writes them all, one writes one alone (each
// item of a round with fewer than MergeMin of the kind, or a second item
// for a row already in the round: its own statement, after the merged
// one, so that each item of a merged statement names a row once). fn gets
// the item's answer.
func QueueMerged[K comparable, P, R any](q *Queue, key any, id K, p P, fn func(R, error),
	one func(*pgx.Batch, P, func(R, error)), many func(*pgx.Batch, []P, []func(R, error))) {
	queueMerged(q, key, id, p, fn, one, many, MergeMin)
}

// queueMerged is QueueMerged merging from least items (BenchmarkMergedMoves
// merges from two).
func queueMerged[K comparable, P, R any](q *Queue, key any, id K, p P, fn func(R, error),
	one func(*pgx.Batch, P, func(R, error)), many func(*pgx.Batch, []P, []func(R, error)), least int) {
	m := q.Merged(key, func() Merged { return &merge[K, P, R]{one: one, many: many, least: least, ids: map[K]bool{}} }).(*merge[K, P, R])
	if m.ids[id] {
		m.later = append(m.later, func(b *pgx.Batch) { one(b, p, fn) })
		return
	}
	m.ids[id] = true
	m.ps, m.fns = append(m.ps, p), append(m.fns, fn)
}

// merge is a round's items of one kind (QueueMerged), their rows distinct.
type merge[K comparable, P, R any] struct {
	one   func(*pgx.Batch, P, func(R, error))
	many  func(*pgx.Batch, []P, []func(R, error))
	least int // the fewest items merged
	ps    []P
	fns   []func(R, error)
	ids   map[K]bool
	// later: the items for a row already in ps, each its own statement
	// after theirs.
	later []func(*pgx.Batch)
}

// MergeMin is the fewest items of one kind a round merges into one
// statement; fewer go as one-row statements each, as before merging. A
// merged statement's fixed cost (its larger plan started, its arrays
// unpacked) is that of several one-row statements: BenchmarkMergedMoves
// gave the database 360–470 µs of CPU a move merged in twos against
// 235–270 as one-row statements, 190–251 against 175–263 in fours,
// 151–178 against 146–161 in sixes, and 87–123 against 142–193 in eights.
const MergeMin = 8

func (m *merge[K, P, R]) Queue(b *pgx.Batch) int {
	merged := 0
	if len(m.ps) < max(m.least, 2) {
		for i, p := range m.ps {
			m.one(b, p, m.fns[i])
		}
	} else {
		m.many(b, m.ps, m.fns)
		merged = len(m.ps)
	}
	for _, queue := range m.later {
		queue(b)
	}
	return merged
}

// queueRound is one round trip's merged statements, in the order the
// round's steps first asked for them.
type queueRound struct {
	merged map[any]Merged
	order  []Merged
}

// Merged returns the round's merged statement under key, made by mk the
// first time a step of the round asks for it. A step adds its item to
// what Merged returns, during its QueueFunc (or a Then's), never later.
func (q *Queue) Merged(key any, mk func() Merged) Merged {
	r := q.round
	if m, ok := r.merged[key]; ok {
		return m
	}
	m := mk()
	if r.merged == nil {
		r.merged = map[any]Merged{}
	}
	r.merged[key] = m
	r.order = append(r.order, m)
	return m
}

// Then queues next for the group's next round trip, after every finish
// of this one: the statements of a step that need this round's answers
// (the recording's move that names the action set just inserted). Called
// from the step's finish, at most once per round.
func (q *Queue) Then(next QueueFunc) { q.then = next }

// A Tail is work many queued steps of one group share, run once in the
// group's transaction after the steps' last round trip: every delivery
// job the group's steps enqueue, inserted with one statement. An error
// from Run rolls the group back, and each step is written again alone
// (with a tail of its own).
type Tail interface {
	Run(ctx context.Context, tx pgx.Tx) error
}

// Tail returns the group's tail under key, made by mk the first time a
// step of the group asks for it. Tails run in the order they were made.
func (q *Queue) Tail(key any, mk func() Tail) Tail {
	if t, ok := q.run.tails[key]; ok {
		return t
	}
	t := mk()
	if q.run.tails == nil {
		q.run.tails = map[any]Tail{}
	}
	q.run.tails[key] = t
	q.run.order = append(q.run.order, t)
	return t
}

// queueRun is the queued steps of one transaction (a group, or one step
// written alone): their tails.
type queueRun struct {
	tails map[any]Tail
	order []Tail
	told  bool // a group's: its tails that are OutcomeTails are told how it ended
	// merged counts the steps whose statement was merged with another
	// step's (Merged, two items or more).
	merged int
}

// An OutcomeTail is a Tail told how its group's transaction ended:
// Committed once the commit succeeded, Abandoned when it rolled back or
// its outcome is unknown (the connection failed during the commit). Only
// the tails of a group are told (Queue.Told); those of a step written
// alone are not.
type OutcomeTail interface {
	Tail
	Committed()
	Abandoned()
}

// Told reports whether q's tails that are OutcomeTails will be told how
// its transaction ended.
func (q *Queue) Told() bool { return q.run.told }

// tell tells run's OutcomeTails how their transaction ended.
func (run *queueRun) tell(committed bool) {
	for _, t := range run.order {
		if ot, ok := t.(OutcomeTail); ok {
			if committed {
				ot.Committed()
			} else {
				ot.Abandoned()
			}
		}
	}
}

// runQueued writes the queued steps qs in tx, round trip by round trip,
// then their tails. outcome records step i's result and says whether the
// transaction can still commit with it; runQueued stops at the first
// step it cannot (errStep). A batch the database refused is errStep too
// when grouped (each step alone says whose it was); alone, the step's
// finish gets it.
func runQueued(ctx context.Context, tx pgx.Tx, run *queueRun, qs []QueueFunc, idx []int, alone bool, outcome func(i int, err error) bool) error {
	type pending struct {
		i  int
		qf QueueFunc
	}
	todo := make([]pending, len(qs))
	for k, qf := range qs {
		todo[k] = pending{idx[k], qf}
	}
	for len(todo) > 0 {
		b := &pgx.Batch{}
		round := &queueRound{}
		queues := make([]*Queue, len(todo))
		finish := make([]FinishFunc, len(todo))
		for k, p := range todo {
			queues[k] = &Queue{Batch: b, run: run, round: round}
			finish[k] = p.qf(queues[k])
		}
		for _, m := range round.order {
			run.merged += m.Queue(b)
		}
		var batchErr error
		if b.Len() > 0 {
			batchErr = tx.SendBatch(ctx, b).Close()
		}
		if batchErr != nil && !alone {
			return errStep // a statement refused: each step alone says whose
		}
		var next []pending
		for k, p := range todo {
			if !outcome(p.i, finish[k](ctx, tx, batchErr)) {
				return errStep
			}
			if then := queues[k].then; then != nil {
				next = append(next, pending{p.i, then})
			}
		}
		todo = next
	}
	for _, t := range run.order {
		if err := t.Run(ctx, tx); err != nil {
			if alone {
				outcome(idx[0], err)
			}
			return errStep
		}
	}
	return nil
}

// WroteNothing marks a step's error as one that left the group's
// transaction as it found it: every statement of the step succeeded and
// none changed a row (a compare-and-set that matched no row). The group
// commits the other steps; the caller of Commit gets err itself.
func WroteNothing(err error) error {
	if err == nil {
		return nil
	}
	return wroteNothing{err}
}

type wroteNothing struct{ error }

func (w wroteNothing) Unwrap() error { return w.error }

// CommitStats counts what a committer did since it was made.
type CommitStats struct {
	// Groups is how many group transactions committed; Items how many
	// steps they held.
	Groups, Items int64
	// Alone is how many steps were written again alone, after their
	// group rolled back (a step's error, a deadlock).
	Alone int64
	// Merged is how many steps of committed groups had their statement
	// merged with other steps' of their kind (Queue.Merged): one
	// statement for a round's moves of recordings, one for its moves of
	// transcripts, one for its deliveries' tries, one for their
	// settlements.
	Merged int64
}

// Committer gathers the steps of a process's workers into group
// transactions on one pool (Commit). A Ledger has one (Ledger.Committer);
// the outbox shares it when both use the same pool. It is safe for
// concurrent use.
type Committer struct {
	pool *pgxpool.Pool
	cfg  CommitConfig

	mu      sync.Mutex
	queue   []*commitItem
	open    bool // a group is gathering (its flusher lingers)
	running int  // groups being gathered or written
	full    chan struct{}

	groups, items, alone, merged atomic.Int64
}

type commitItem struct {
	ctx context.Context
	fn  CommitFunc
	// queue, when set, is the step as a QueueFunc (fn runs it alone).
	queue QueueFunc
	done  chan error
	// taken: a flusher took the item into a group; abandoned: its caller
	// gave up before that. One of the two wins.
	state atomic.Int32
}

const (
	itemQueued int32 = iota
	itemTaken
	itemAbandoned
)

// NewCommitter returns a committer on pool configured by cfg (its zero
// fields defaulted).
func NewCommitter(pool *pgxpool.Pool, cfg CommitConfig) (*Committer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Committer{pool: pool, cfg: cfg, full: make(chan struct{}, 1)}, nil
}

// Grouping reports whether c gathers steps into groups (MaxItems > 1).
func (c *Committer) Grouping() bool { return c.cfg.MaxItems > 1 }

// Commit is Ledger.Commit on the ledger's committer.
func (l *Ledger) Commit(ctx context.Context, fn CommitFunc) error { return l.commit.Commit(ctx, fn) }

// Committer is the ledger's committer, for the outbox's steps on the same
// pool.
func (l *Ledger) Committer() *Committer { return l.commit }

// Commit runs fn in a transaction and returns once that transaction has
// committed (nil, or fn's WroteNothing error) or rolled back (an error).
// When c groups (CommitConfig.MaxItems > 1), the transaction is shared with
// other steps of this process gathered meanwhile; a step whose fn fails
// rolls its group back and every step of the group is then written again
// alone, each in its own transaction, so one step's error is its own. A
// crash loses only steps whose Commit had not returned: nothing is
// acknowledged before its group's commit.
//
// When ctx ends while the step waits in line, Commit returns ctx's error
// and the step is not written; when it ends while the step's group is
// being written, Commit returns an error saying so, and the step may or
// may not have committed (as with any commit cut short): the caller reads
// again. fn may then still be running: a caller reads what fn assigns
// only after Commit returned nil or fn's own WroteNothing error (both
// come after fn's last run).
func (c *Committer) Commit(ctx context.Context, fn CommitFunc) error {
	if !c.Grouping() {
		return unwrapNothing(pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error { return fn(ctx, tx) }))
	}
	return c.await(ctx, &commitItem{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// await queues it and waits for its group's outcome (see Commit).
func (c *Committer) await(ctx context.Context, it *commitItem) error {
	c.enqueue(it)
	select {
	case err := <-it.done:
		return err
	case <-ctx.Done():
		if it.state.CompareAndSwap(itemQueued, itemAbandoned) {
			return ctx.Err()
		}
		return fmt.Errorf("a group commit holding this step was under way when it was cancelled; read again to know whether it committed: %w", ctx.Err())
	}
}

// CommitQueued is Commit for a step given as a QueueFunc: in a group, its
// statements travel with the other queued steps' in one round trip per
// round. alone, when set, is the same step as a CommitFunc, written when
// the step commits on its own (group commit off, or its group rolled
// back): a step whose queued form cannot handle every case (finish
// returns an error for the rare one) handles it there. Without alone,
// the queued form runs in a transaction of its own.
func (c *Committer) CommitQueued(ctx context.Context, queue QueueFunc, alone CommitFunc) error {
	if alone == nil {
		alone = queuedAlone(queue)
	}
	if !c.Grouping() {
		return c.Commit(ctx, alone)
	}
	return c.await(ctx, &commitItem{ctx: ctx, fn: alone, queue: queue, done: make(chan error, 1)})
}

// queuedAlone is queue as a CommitFunc: its rounds and tails in the
// caller's transaction.
func queuedAlone(queue QueueFunc) CommitFunc {
	return func(ctx context.Context, tx pgx.Tx) error {
		var res error
		err := runQueued(ctx, tx, &queueRun{}, []QueueFunc{queue}, []int{0}, true, func(_ int, err error) bool {
			res = err
			var wn wroteNothing
			return err == nil || errors.As(err, &wn)
		})
		if err != nil && res == nil {
			return err
		}
		return res
	}
}

// Stats reports what c did since it was made (zero when it does not
// group).
func (c *Committer) Stats() CommitStats {
	return CommitStats{Groups: c.groups.Load(), Items: c.items.Load(), Alone: c.alone.Load(), Merged: c.merged.Load()}
}

// processCommits counts what every committer of the process did.
var processCommits struct{ groups, items, alone, merged atomic.Int64 }

// ProcessCommitStats reports what every committer of this process did
// since it started (the per-process metrics).
func ProcessCommitStats() CommitStats {
	return CommitStats{Groups: processCommits.groups.Load(), Items: processCommits.items.Load(), Alone: processCommits.alone.Load(),
		Merged: processCommits.merged.Load()}
}

// CommitStats reports what the ledger's committer did.
func (l *Ledger) CommitStats() CommitStats { return l.commit.Stats() }

func unwrapNothing(err error) error {
	var wn wroteNothing
	if errors.As(err, &wn) {
		return wn.error
	}
	return err
}

func (c *Committer) enqueue(it *commitItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, it)
	if len(c.queue) >= c.cfg.MaxItems {
		select {
		case c.full <- struct{}{}:
		default:
		}
	}
	c.startLocked(c.cfg.Linger)
}

// startLocked starts a flusher for the queued steps unless one is
// already gathering or every flusher is busy (then the one that finishes
// first takes them).
func (c *Committer) startLocked(linger time.Duration) {
	if c.open || c.running >= c.cfg.Flushers || len(c.queue) == 0 {
		return
	}
	c.open = true
	c.running++
	go c.flush(linger)
}

// flush gathers one group (lingering up to linger while it is short of
// MaxItems) and writes it, then takes what queued up meanwhile, group
// after group, until nothing waits or another flusher is gathering. It
// goes on in the same goroutine rather than starting one per group: a
// group's writing grows its goroutine's stack (pgx, the steps' queries),
// and a new goroutine paid that growth again, copying its stack a few
// times for every group (runtime.copystack, about 9 µs a recording in the
// worker's profile of make bench's 10,000).
func (c *Committer) flush(linger time.Duration) {
	for {
		if linger > 0 {
			t := time.NewTimer(linger)
			select {
			case <-t.C:
			case <-c.full:
			}
			t.Stop()
		}
		c.mu.Lock()
		n := min(len(c.queue), c.cfg.MaxItems)
		group := make([]*commitItem, 0, n)
		for _, it := range c.queue[:n] {
			if it.state.CompareAndSwap(itemQueued, itemTaken) {
				group = append(group, it)
			}
		}
		c.queue = append(c.queue[:0:0], c.queue[n:]...)
		c.open = false
		// Steps beyond this group start the next one now, if a flusher is
		// free: they have waited already.
		c.startLocked(0)
		c.mu.Unlock()

		if len(group) > 0 {
			c.write(group)
		}

		c.mu.Lock()
		if c.open || len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		// What queued while this group was written, and no flusher is
		// gathering it: this one does, without lingering (as startLocked(0)).
		c.open = true
		c.mu.Unlock()
		linger = 0
	}
}

// errStep stops a group at a step that failed.
var errStep = errors.New("a step of the group failed")

// write commits group in one transaction, or, when that fails for a
// reason the database reported (a step's error, a deadlock, a check at
// commit), writes each step again alone.
func (c *Committer) write(group []*commitItem) {
	ctx, cancel := context.WithTimeout(context.Background(), commitGroupTimeout)
	defer cancel()
	results := make([]error, len(group))
	run := &queueRun{told: true}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		for _, it := range group {
			it.done <- fmt.Errorf("beginning a group commit: %w", err)
		}
		return
	}
	err = func() error {
		// outcome records step i's error: false when the group cannot
		// commit with it.
		outcome := func(i int, err error) bool {
			var wn wroteNothing
			if errors.As(err, &wn) {
				results[i] = wn.error
				return true
			}
			return err == nil
		}
		// The steps that need answers between their statements, one
		// after the other; then every queued step's statements, round
		// trip by round trip, in the group's order.
		var qs []QueueFunc
		var idx []int
		for i, it := range group {
			if it.ctx.Err() != nil {
				return errStep // its caller is gone: write the others without it
			}
			if it.queue != nil {
				qs, idx = append(qs, it.queue), append(idx, i)
				continue
			}
			if !outcome(i, it.fn(ctx, tx)) {
				return errStep
			}
		}
		return runQueued(ctx, tx, run, qs, idx, false, outcome)
	}()
	if err != nil {
		_ = tx.Rollback(ctx)
	} else {
		faultPoint("group_commit_before_commit")
		err = tx.Commit(ctx)
	}
	if err != nil {
		run.tell(false)
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		faultPoint("group_commit_after_commit")
		run.tell(true)
		c.groups.Add(1)
		c.items.Add(int64(len(group)))
		c.merged.Add(int64(run.merged))
		processCommits.groups.Add(1)
		processCommits.items.Add(int64(len(group)))
		processCommits.merged.Add(int64(run.merged))
		for i, it := range group {
			it.done <- results[i]
		}
	case errors.Is(err, errStep) || errors.As(err, &pgErr):
		// A step failed, or the database refused the commit: nothing of
		// the group committed. Each step alone, with its own context, so
		// that its error is its own.
		for _, it := range group {
			c.alone.Add(1)
			processCommits.alone.Add(1)
			it.done <- unwrapNothing(pgx.BeginFunc(it.ctx, c.pool, func(tx pgx.Tx) error { return it.fn(it.ctx, tx) }))
		}
	default:
		// The connection failed: the group may or may not have committed.
		for _, it := range group {
			it.done <- fmt.Errorf("group commit of %d steps: %w", len(group), err)
		}
	}
}
