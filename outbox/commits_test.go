package outbox_test

import (
	"context"
	"io/fs"
	"maps"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/migrations"
	"github.com/callscribe/callscribe/outbox"
)

// commitCounter is a pgx.QueryTracer that counts the transactions its
// pool's statements commit, as pg_stat_database.xact_commit counts them:
// a statement that succeeds while its connection is outside a transaction
// commits one of its own (autocommit), labelled with its sqlc query name;
// a COMMIT whose command tag says COMMIT (not ROLLBACK) commits one,
// labelled "transaction"; BEGIN and the statements inside a transaction
// commit none. It counts exactly, with no sampling and no server-wide
// statistics (which River's own work and the stats collector's delays
// would blur). It does not see what pgx does below its tracer: a
// statement's first use on a connection prepares it (Parse, Describe,
// Sync), which the server also counts as a transaction, once per
// connection and statement, not per delivery.
type commitCounter struct {
	mu      sync.Mutex
	commits map[string]int
}

// Context keys of a traced statement: whether its connection was outside
// a transaction when it began, and its SQL.
type (
	outsideTxKey struct{}
	sqlKey       struct{}
)

var sqlcName = regexp.MustCompile(`^-- name: (\w+)`)

func (c *commitCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx = context.WithValue(ctx, sqlKey{}, data.SQL)
	return context.WithValue(ctx, outsideTxKey{}, conn.PgConn().TxStatus() == 'I')
}

func (c *commitCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err != nil {
		return
	}
	label := "transaction"
	switch tag := data.CommandTag.String(); {
	case tag == "COMMIT":
	case tag == "BEGIN", ctx.Value(outsideTxKey{}) != true:
		return
	default:
		label = "statement"
		if sql, _ := ctx.Value(sqlKey{}).(string); sqlcName.MatchString(sql) {
			label = sqlcName.FindStringSubmatch(sql)[1]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits[label]++
}

// A batch sent outside a transaction runs as one implicit transaction: it
// commits one, labelled with its statements' names joined by "+".
type batchKey struct{}

type batchTrace struct {
	outsideTx bool
	names     []string
}

func (c *commitCounter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchKey{}, &batchTrace{outsideTx: conn.PgConn().TxStatus() == 'I'})
}

func (c *commitCounter) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if b, ok := ctx.Value(batchKey{}).(*batchTrace); ok && data.Err == nil {
		name := "statement"
		if m := sqlcName.FindStringSubmatch(data.SQL); m != nil {
			name = m[1]
		}
		b.names = append(b.names, name)
	}
}

func (c *commitCounter) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	b, ok := ctx.Value(batchKey{}).(*batchTrace)
	if !ok || data.Err != nil || !b.outsideTx {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits[strings.Join(b.names, "+")]++
}

// readWithScope labels a try's first round trip: the row with its action
// set, and the scope's deferral after its key (shared), in one implicit
// transaction.
const readWithScope = "OutboxDeliveryGet+ScopeDeferralReadLock+ScopeDeferralGetForAdmission"

// take returns the commits counted since the last take and starts again.
func (c *commitCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.commits
	c.commits = map[string]int{}
	return out
}

// tracedPool is a pool on pool's database whose commits are counted.
func tracedPool(t *testing.T, pool *pgxpool.Pool) (*pgxpool.Pool, *commitCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.URLOf(t, pool))
	if err != nil {
		t.Fatal(err)
	}
	counter := &commitCounter{commits: map[string]int{}}
	cfg.ConnConfig.Tracer = counter
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	return traced, counter
}

// settledRecorder is an outbox.Metrics that keeps the receipt -> CRM time
// of each delivered row.
type settledRecorder struct {
	mu        sync.Mutex
	delivered []time.Duration
}

func (*settledRecorder) CRMThrottled(string, string, int)  {}
func (*settledRecorder) CRMCooldown(string, time.Duration) {}
func (s *settledRecorder) CRMSettled(_, state string, receiptToCRM time.Duration) {
	if state != outbox.StateDelivered {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered = append(s.delivered, receiptToCRM)
}

func (s *settledRecorder) receipts() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.delivered)
}

// gaugingTarget applies every set and reports the CRM's usage gauges.
type gaugingTarget struct{ gauges map[string]float64 }

func (gaugingTarget) Name() string { return "gauging" }
func (g gaugingTarget) Deliver(context.Context, connector.Delivery) (connector.Result, error) {
	return connector.Result{Outcome: connector.OutcomeApplied, Class: connector.ClassApplied, HTTPStatus: 201, CRMID: "crm_1",
		Gauges: g.gauges}, nil
}

// counted is what deliverCounted saw during the deliveries.
type counted struct {
	outbox *outbox.Outbox
	pool   *pgxpool.Pool
	// outboxCommits and ledgerCommits: the transactions each committed,
	// by label.
	outboxCommits, ledgerCommits map[string]int
	// steps: what the outbox's committer wrote during the deliveries.
	steps ledger.CommitStats
	// receipts: each delivery's receipt -> CRM time.
	receipts []time.Duration
}

// deliverCounted commits n action sets of tenant acme and delivers them to
// tgt, the outbox on a traced pool and the ledger on another (so that
// admission is counted apart), River on a pool of its own (its work is
// not counted).
//
// An admission stays good for a minute (outbox.Config.AdmissionMaxAge):
// on a loaded machine a try can wait past the default 100 ms between its
// admission and its call, and then reads the scope again, a read of the
// ledger's that these counts are not about (TestDeliveryRechecksAnOldAdmission
// counts those).
func deliverCounted(t *testing.T, tgt connector.Target, n int) counted {
	t.Helper()
	return deliverCountedWith(t, tgt, n, ledger.CommitConfig{}, 4, time.Minute)
}

// deliverCountedWith is deliverCounted with the outbox's committer
// configured by cfg, maxWorkers River workers and admissions good for
// maxAge.
func deliverCountedWith(t *testing.T, tgt connector.Target, n int, cfg ledger.CommitConfig, maxWorkers int, maxAge time.Duration) counted {
	t.Helper()
	ctx := context.Background()
	pool := testdb.New(t)
	outboxPool, outboxCounter := tracedPool(t, pool)
	ledgerPool, ledgerCounter := tracedPool(t, pool)
	l, err := ledger.New(ledgerPool, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &settledRecorder{}
	committer, err := ledger.NewCommitter(outboxPool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := mustOutbox(t, outbox.Config{Destinations: map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook", Target: tgt}},
		Metrics: rec, Committer: committer, AdmissionMaxAge: maxAge}, outboxPool, l)
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers,
		Queues: map[string]river.QueueConfig{outbox.Queue: {MaxWorkers: maxWorkers}}, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, ledger: l, outbox: o, client: client}
	var ids []int64
	for range n {
		res, err := o.Commit(ctx, client, b.validated(t, "acme"), someActions)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.OutboxIDs...)
	}
	outboxCounter.take()
	ledgerCounter.take()
	before := committer.Stats()
	completed, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed, river.EventKindJobFailed)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.StopAndCancel(context.Background()) }()
	// The metrics hear of a delivery after its settle returned: once all
	// have, every statement of the deliveries has been counted.
	if !testwait.Until(30*time.Second, completed, func() bool { return len(rec.receipts()) == n }) {
		t.Fatalf("%d of %d deliveries recorded in 30s", len(rec.receipts()), n)
	}
	after := committer.Stats()
	c := counted{outbox: o, pool: pool, outboxCommits: outboxCounter.take(), ledgerCommits: ledgerCounter.take(), receipts: rec.receipts(),
		steps: ledger.CommitStats{Groups: after.Groups - before.Groups, Items: after.Items - before.Items, Alone: after.Alone - before.Alone,
			Merged: after.Merged - before.Merged}}
	for _, id := range ids {
		r, err := o.RowByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != outbox.StateDelivered || r.Attempts != 1 {
			t.Fatalf("row %+v, want delivered at the first try", r)
		}
	}
	return c
}

// A delivery that the CRM (the crm-webhook/v1 simulator) applies at the
// first try costs at most three commits of the outbox's own statements:
// the read of the row with its action set and receipt time, and two steps
// of group transactions (shared with other deliveries' steps when they
// meet): the try recorded before the call, and the settle (outcome, event
// and gauges in one statement). The receipt -> CRM time comes from the row: the ledger reads
// no recording for it.
func TestDeliveryCostsAtMostThreeCommits(t *testing.T) {
	t.Parallel()
	const n = 20
	sim, tgt := simTarget(t)
	c := deliverCounted(t, tgt, n)
	checkGroupedCommits(t, c, n)
	if total := sum(c.outboxCommits); total > 3*n {
		t.Fatalf("%d commits for %d deliveries, want at most %d", total, n, 3*n)
	}
	if got := c.ledgerCommits["RecordingGet"]; got != 0 {
		t.Fatalf("the ledger read a recording %d times during the deliveries (%v): the receipt time is on the row", got, c.ledgerCommits)
	}
	// The scope's deferral comes with the row: the ledger reads it on its
	// own only until the scope has its row (at most once per worker, 4,
	// each an ensure and a read).
	if got := sum(c.ledgerCommits); got > 2*4 {
		t.Fatalf("the ledger committed %v during %d deliveries, want at most 8: each try's admission decides from the scope read with its row", c.ledgerCommits, n)
	}
	for _, d := range c.receipts {
		if d <= 0 || d > time.Minute {
			t.Fatalf("receipt -> CRM times %v, want each positive and under a minute", c.receipts)
		}
	}
	if st := sim.Stats(); st.Deliveries != n {
		t.Fatalf("the CRM saw %d deliveries, want %d", st.Deliveries, n)
	}
}

// A try whose admission is older than AdmissionMaxAge when it is about
// to call the CRM reads its scope again (ledger.ScopeRecheck) and is then
// sent: with admissions good for a nanosecond, every delivery costs one
// more read of the scope than with admissions good for a minute, and is
// still delivered at its first try.
func TestDeliveryRechecksAnOldAdmission(t *testing.T) {
	t.Parallel()
	const n = 8
	_, tgt := simTarget(t)
	c := deliverCountedWith(t, tgt, n, ledger.CommitConfig{}, 4, time.Nanosecond)
	// Each try's admission decides from the scope read with its row, or
	// (at most once per worker, until the scope has its row) from a read
	// of its own; each then rechecks once.
	reads := c.ledgerCommits["ScopeDeferralReadLock+ScopeDeferralGetForAdmission"]
	if reads < n || reads > n+4 {
		t.Fatalf("the ledger committed %v during %d deliveries, want %d to %d scope reads: one recheck a try, and at most one first read a worker",
			c.ledgerCommits, n, n, n+4)
	}
}

// Tries and settlements that meet in a group are written by one merged
// statement each (ledger.QueueMerged): every delivery still costs its
// try and its settle, once each, and each row keeps one event, its own.
func TestDeliveriesMergedInGroups(t *testing.T) {
	t.Parallel()
	const n = 16
	sim, tgt := simTarget(t)
	// A group waits long enough for the workers' steps to meet in it,
	// whatever the machine's load: as many workers as a merge needs
	// (ledger.MergeMin).
	c := deliverCountedWith(t, tgt, n, ledger.CommitConfig{MaxItems: 2 * ledger.MergeMin, Flushers: 1, Linger: 500 * time.Millisecond},
		ledger.MergeMin, time.Minute)
	checkGroupedCommits(t, c, n)
	if c.steps.Merged < ledger.MergeMin {
		t.Fatalf("committer %+v: no try or settlement was merged with others", c.steps)
	}
	rows, err := c.pool.Query(context.Background(), `SELECT o.id, count(e.*), min(e.attempt), min(e.prior_state), min(e.new_state), min(e.outcome), min(e.response_class),
		min(e.http_status), bool_and(e.crm_id = o.crm_id), min(o.last_class)
		FROM outbox o LEFT JOIN outbox_events e ON e.outbox_id = o.id GROUP BY o.id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Events                   int64
		Attempt                      int32
		Prior, State, Outcome, Class string
		Status                       int32
		SameCRMID                    bool
		RowClass                     string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d outbox rows, want %d", len(got), n)
	}
	for _, r := range got {
		if r.Events != 1 || r.Attempt != 1 || r.Prior != outbox.StatePending || r.State != outbox.StateDelivered ||
			r.Outcome != string(connector.OutcomeApplied) || r.Class != r.RowClass || r.Class == "" || r.Status/100 != 2 || !r.SameCRMID {
			t.Fatalf("row %+v: want one event, the first try's, pending -> delivered, applied with a 2xx and the row's class and CRM id", r)
		}
	}
	if st := sim.Stats(); st.Deliveries != n {
		t.Fatalf("the CRM saw %d deliveries, want %d", st.Deliveries, n)
	}
}

// simTarget serves a crm-webhook/v1 simulator with its defaults for the
// test and returns it with a webhook target that delivers to it.
func simTarget(t *testing.T) (*crmsim.Server, connector.Target) {
	t.Helper()
	sim, err := crmsim.New(crmsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	tgt, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: crmsim.TokenDefault})
	if err != nil {
		t.Fatal(err)
	}
	return sim, tgt
}

// checkGroupedCommits checks the commits of n deliveries applied at the
// first try: one read each, and every try and settle a step of a group
// transaction (each group one commit), none written again alone.
func checkGroupedCommits(t *testing.T, c counted, n int) {
	t.Helper()
	want := map[string]int{readWithScope: n, "transaction": int(c.steps.Groups)}
	if !maps.Equal(c.outboxCommits, want) || c.steps.Items != int64(2*n) || c.steps.Alone != 0 {
		t.Fatalf("the outbox committed %v for %d deliveries, its committer %+v; want %v and %d steps (a try and a settle each) in groups",
			c.outboxCommits, n, c.steps, want, 2*n)
	}
}

// The CRM's usage gauges are written by the settle's own statement: they
// cost no commit of their own, and every gauge is kept.
func TestDeliveryKeepsGaugesWithItsSettle(t *testing.T) {
	t.Parallel()
	const n = 3
	gauges := map[string]float64{"crm_api_remaining": 1234, "crm_api_used": 25}
	c := deliverCounted(t, gaugingTarget{gauges: gauges}, n)
	// A settle with gauges commits alone (it locks the shared counters),
	// the try in a group.
	want := map[string]int{readWithScope: n, "transaction": int(c.steps.Groups), "OutboxSettle": n}
	if !maps.Equal(c.outboxCommits, want) || c.steps.Items != int64(n) || c.steps.Alone != 0 {
		t.Fatalf("the outbox committed %v for %d deliveries, its committer %+v; want %v and %d tries in groups", c.outboxCommits, n, c.steps, want, n)
	}
	got, err := c.outbox.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range gauges {
		if got[name] != int64(v) {
			t.Fatalf("counters %v, want %s = %v", got, name, v)
		}
	}
}

// Migration 00009 stores the receipt time of rows committed before it that
// can still be delivered, and its down path removes the column again.
func TestMigrationGivesPendingRowsTheirReceiptTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook"}})
	rec := b.validated(t, "acme")
	res, err := b.outbox.Commit(ctx, b.client, rec, someActions)
	if err != nil {
		t.Fatal(err)
	}
	src, err := fs.ReadFile(migrations.FS(), "00009_outbox_received_at.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, down, ok := strings.Cut(string(src), "-- +goose Down")
	if !ok {
		t.Fatal("00009 has no down part")
	}
	receivedAt := func() (*time.Time, error) {
		var at *time.Time
		err := b.pool.QueryRow(ctx, "SELECT received_at FROM outbox WHERE id = $1", res.OutboxIDs[0]).Scan(&at)
		return at, err
	}
	if at, err := receivedAt(); err != nil || at == nil || !at.Equal(rec.CreatedAt) {
		t.Fatalf("received_at at commit = %v (%v), want the recording's %s", at, err, rec.CreatedAt)
	}
	if _, err := b.pool.Exec(ctx, down); err != nil {
		t.Fatalf("00009 down: %v", err)
	}
	var cols int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'received_at'").Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("after 00009 down, %d received_at columns (%v)", cols, err)
	}
	if _, err := b.pool.Exec(ctx, up); err != nil {
		t.Fatalf("00009 up: %v", err)
	}
	if at, err := receivedAt(); err != nil || at == nil || !at.Equal(rec.CreatedAt) {
		t.Fatalf("received_at after 00009 up = %v (%v), want the recording's %s", at, err, rec.CreatedAt)
	}
}

func sum(m map[string]int) int {
	total := 0
	for _, v := range m {
		total += v
	}
	return total
}

// DeliverArgs' Scope is not part of its unique key: a job that carries it
// and one enqueued without it (by an earlier version) are one job.
func TestDeliverArgsScopeIsNotPartOfTheUniqueKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	first, err := b.client.Insert(ctx, outbox.DeliverArgs{OutboxID: 99}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.client.Insert(ctx, outbox.DeliverArgs{OutboxID: 99, Scope: "crm:acme:webhook"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.UniqueSkippedAsDuplicate || second.Job.ID != first.Job.ID {
		t.Fatalf("the job with a scope was inserted beside the one without (%d, %d)", first.Job.ID, second.Job.ID)
	}
}
