package outbox_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/migrations"
	"github.com/callscribe/callscribe/outbox"
)

// clocked is a bundle whose ledger, outbox and CRM doubles all read one
// stub clock, and whose River client runs the dispatcher. Time passes only
// when the test says (tick): River still snoozes in real time, so tick also
// wakes the snoozed delivery jobs, as River would once their time came.
type clocked struct {
	*bundle
	stub *clock.Stub
	// ended fires whenever a job ends a run (completed, snoozed, failed,
	// cancelled).
	ended <-chan *river.Event
}

func setupClocked(t *testing.T, stub *clock.Stub, cfg outbox.Config, periodic bool) *clocked {
	t.Helper()
	pool := testdb.New(t)
	l, err := ledger.New(pool, &ledger.Config{Clock: stub})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clock = stub
	cfg.ProbeWait = 20 * time.Millisecond
	o := mustOutbox(t, cfg, pool, l)
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	rc := &river.Config{Workers: workers, Queues: o.Queues(), FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond}
	if periodic {
		rc.PeriodicJobs = o.PeriodicJobs()
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		t.Fatal(err)
	}
	ended, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed,
		river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(unsubscribe)
	return &clocked{bundle: &bundle{pool: pool, ledger: l, outbox: o, client: client}, stub: stub, ended: ended}
}

func (c *clocked) start(t *testing.T) {
	t.Helper()
	if err := c.client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.client.StopAndCancel(context.Background()) })
}

// deliveryJobs lists the crm_deliver jobs; a job that failed fails the
// test (the dispatcher's waits are snoozes, never errors).
func (c *clocked) deliveryJobs(t *testing.T) []*rivertype.JobRow {
	t.Helper()
	return deliveryJobs(t, c.client)
}

// deliveryJobs lists client's crm_deliver jobs; a job that failed fails
// the test.
func deliveryJobs(t *testing.T, client *river.Client[pgx.Tx]) []*rivertype.JobRow {
	t.Helper()
	res, err := client.JobList(context.Background(), river.NewJobListParams().Kinds(outbox.DeliverArgs{}.Kind()).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		if len(j.Errors) > 0 {
			t.Fatalf("delivery job %d failed: %+v", j.ID, j.Errors)
		}
	}
	return res.Jobs
}

// idle waits until every delivery job is snoozed or finished: none is
// available or running.
func (c *clocked) idle(t *testing.T) []*rivertype.JobRow {
	t.Helper()
	var jobs []*rivertype.JobRow
	if !testwait.Until(20*time.Second, c.ended, func() bool {
		jobs = c.deliveryJobs(t)
		for _, j := range jobs {
			if j.State != rivertype.JobStateScheduled && j.State != rivertype.JobStateCompleted {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("delivery jobs still busy after 20s: %+v", jobs)
	}
	return jobs
}

// tick moves the clock by d and wakes every snoozed delivery job.
func (c *clocked) tick(t *testing.T, d time.Duration) {
	t.Helper()
	c.stub.Advance(d)
	for _, j := range c.deliveryJobs(t) {
		if j.State == rivertype.JobStateScheduled {
			if _, err := c.client.JobRetry(context.Background(), j.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (c *clocked) row(t *testing.T, id int64) outbox.Row {
	t.Helper()
	r, err := c.outbox.RowByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (c *clocked) lastEvent(t *testing.T, id int64) outbox.Event {
	t.Helper()
	evs, err := c.outbox.Events(context.Background(), id)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of row %d: %+v, %v", id, evs, err)
	}
	return evs[len(evs)-1]
}

// A CRM whose quota stays spent (every delivery 429, Retry-After 20s) and
// a one-minute delivery deadline: no delivery stays pending past its
// deadline. Each goes dead, with a reason naming the deadline and the
// throttling, by its own job: the try whose Retry-After reaches past the
// deadline, or the wake-up at the deadline. Once the CRM accepts again,
// the operator's retry gives each a fresh deadline and each is applied
// exactly once, with its original key.
func TestThrottledDeliveriesDieAtTheirDeadlineAndRetryDeliversThemOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stub := clock.NewStub(time.Now().UTC().Truncate(time.Second))
	spent, err := crmsim.New(crmsim.Config{RateLimitShare: 1, Cooldown: 20 * time.Second, Clock: stub})
	if err != nil {
		t.Fatal(err)
	}
	crm, err := crmsim.New(crmsim.Config{Clock: stub})
	if err != nil {
		t.Fatal(err)
	}
	// One CRM endpoint: while the quota is spent, the throttling double
	// answers (it refuses before applying anything); then the healthy one.
	var quotaSpent atomic.Bool
	quotaSpent.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if quotaSpent.Load() {
			spent.Handler().ServeHTTP(w, r)
			return
		}
		crm.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	tgt, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: crmsim.TokenDefault})
	if err != nil {
		t.Fatal(err)
	}
	c := setupClocked(t, stub, outbox.Config{Destinations: map[string]outbox.Destination{
		"acme": {Name: "webhook", Scope: "crm:acme:webhook", Target: tgt, DeliveryDeadline: time.Minute},
	}}, false)
	committedAt := stub.Now()
	var ids []int64
	for range 3 {
		res, err := c.outbox.Commit(ctx, c.client, c.validated(t, "acme"), someActions)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.OutboxIDs...)
	}
	for _, id := range ids {
		if r := c.row(t, id); !r.Deadline.Equal(committedAt.Add(time.Minute)) {
			t.Fatalf("row %d: deadline %s, want commit + 1m = %s", id, r.Deadline, committedAt.Add(time.Minute))
		}
	}
	c.start(t)

	allDead := func() bool {
		for _, id := range ids {
			if c.row(t, id).State != outbox.StateDead {
				return false
			}
		}
		return true
	}
	for tick := 0; ; tick++ {
		jobs := c.idle(t)
		if allDead() {
			break
		}
		for _, j := range jobs {
			// Snoozed no later than the deadline (plus a little), whatever
			// the scope's deferral says.
			if j.State == rivertype.JobStateScheduled && time.Until(j.ScheduledAt) > committedAt.Add(time.Minute).Sub(stub.Now())+time.Second {
				t.Fatalf("job %d snoozed until %s, past the deadline %s of clock time away", j.ID, j.ScheduledAt, committedAt.Add(time.Minute).Sub(stub.Now()))
			}
		}
		if tick == 5 {
			t.Fatalf("rows still pending %s after commit", stub.Now().Sub(committedAt))
		}
		c.tick(t, 20*time.Second)
	}
	if got := stub.Now().Sub(committedAt); got > time.Minute {
		t.Fatalf("the last row died %s after commit, want at its deadline (1m)", got)
	}
	if st := spent.Stats(); st.RateLimited == 0 || st.Applied != 0 {
		t.Fatalf("the spent CRM: %d 429s, %d applied; want some, none", st.RateLimited, st.Applied)
	}
	tooLate := 0
	for _, id := range ids {
		r := c.row(t, id)
		ev := c.lastEvent(t, id)
		if r.LastClass != outbox.ClassDeadline || ev.Prior != outbox.StatePending || ev.New != outbox.StateDead ||
			!strings.HasPrefix(ev.Reason, "delivery deadline passed (1m after commit) while the CRM kept throttling") {
			t.Fatalf("row %d: %+v, last event %+v; want dead by its deadline while throttled", id, r, ev)
		}
		if strings.Contains(ev.Reason, "next try could start no sooner than") {
			tooLate++
			if ev.ResponseClass != "rate_limited" || ev.HTTPStatus != http.StatusTooManyRequests || ev.Outcome != "throttled" {
				t.Fatalf("row %d: the try that ran into the deadline is recorded as %+v", id, ev)
			}
		} else if ev.Outcome != outbox.OutcomeDeadline {
			t.Fatalf("row %d: last event %+v, want outcome deadline", id, ev)
		}
	}
	if tooLate == 0 {
		t.Fatal("no row died at a try whose Retry-After reached past its deadline")
	}

	// The quota is back. Each retried row gets a fresh minute and is
	// delivered once; the CRM applies each key once.
	quotaSpent.Store(false)
	retriedAt := stub.Now()
	for _, id := range ids {
		if !testwait.Until(10*time.Second, c.ended, func() bool {
			err = c.outbox.Retry(ctx, c.client, id)
			if err != nil && !errors.Is(err, outbox.ErrJobRunning) {
				t.Fatal(err)
			}
			return err == nil
		}) {
			t.Fatal(err)
		}
		if r := c.row(t, id); r.State != outbox.StatePending || !r.Deadline.Equal(retriedAt.Add(time.Minute)) {
			t.Fatalf("retried row %d: %s, deadline %s; want pending until %s", id, r.State, r.Deadline, retriedAt.Add(time.Minute))
		}
		if ev := c.lastEvent(t, id); ev.Outcome != "retry" || !strings.Contains(ev.Reason, "new delivery deadline "+retriedAt.Add(time.Minute).Format(time.RFC3339)) {
			t.Fatalf("retry event %+v", ev)
		}
	}
	delivered := func() bool {
		for _, id := range ids {
			if c.row(t, id).State != outbox.StateDelivered {
				return false
			}
		}
		return true
	}
	for tick := 0; !delivered(); tick++ {
		c.idle(t)
		if delivered() {
			break
		}
		if tick == 3 {
			t.Fatalf("retried rows not delivered after %s", stub.Now().Sub(retriedAt))
		}
		// The scope's last deferral may still stand: let it pass.
		c.tick(t, 20*time.Second)
	}
	st := crm.Stats()
	if st.Applied != len(ids) {
		t.Fatalf("the CRM holds %d sets, want %d", st.Applied, len(ids))
	}
	for _, id := range ids {
		key := c.row(t, id).IdempotencyKey
		if n := st.ApplyCount[key]; n != 1 {
			t.Fatalf("%s applied %d times, want once", key, n)
		}
	}
}

// A pending row whose delivery job is gone still dies: the sweep moves it
// to dead once its deadline is SweepGrace behind, and leaves rows within
// their deadline (or its grace) alone. The periodic job runs the sweep
// (also on start). A retried row gets a fresh deadline and survives the
// next sweep. A row within its deadline whose job is gone is adopted (given
// a job) instead, and tried.
func TestSweepKillsPendingRowsWhoseJobIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second)
	stub := clock.NewStub(start)
	// No target: these rows are never tried.
	c := setupClocked(t, stub, outbox.Config{SweepGrace: time.Minute, Destinations: map[string]outbox.Destination{
		"acme":   {Name: "webhook", Scope: "crm:acme:webhook", DeliveryDeadline: time.Minute},
		"harbor": {Name: "webhook", Scope: "crm:harbor:webhook"}, // the default, 24h
	}}, true)
	commit := func(tenant string) int64 {
		t.Helper()
		res, err := c.outbox.Commit(ctx, c.client, c.validated(t, tenant), someActions)
		if err != nil {
			t.Fatal(err)
		}
		return res.OutboxIDs[0]
	}
	lost, other, daily := commit("acme"), commit("acme"), commit("harbor")
	if r := c.row(t, daily); !r.Deadline.Equal(start.Add(outbox.DeliveryDeadlineDefault)) {
		t.Fatalf("row with the default deadline: %s, want %s", r.Deadline, start.Add(outbox.DeliveryDeadlineDefault))
	}
	// Their jobs are lost.
	if _, err := c.pool.Exec(ctx, "DELETE FROM river_job WHERE kind = 'crm_deliver'"); err != nil {
		t.Fatal(err)
	}
	sweep := func(want int) {
		t.Helper()
		n, err := c.outbox.Sweep(ctx)
		if err != nil || n != want {
			t.Fatalf("sweep moved %d (%v), want %d", n, err, want)
		}
	}
	sweep(0)
	stub.Advance(90 * time.Second) // past the deadline, within its grace
	sweep(0)
	b, err := c.outbox.Backlog(ctx)
	if err != nil || b.Pending != 3 || b.OldestAge != 90*time.Second || !b.OldestCreatedAt.Equal(start) {
		t.Fatalf("backlog %+v, %v; want 3 pending, the oldest 90s old", b, err)
	}
	stub.Advance(time.Minute)
	sweep(2)
	for _, id := range []int64{lost, other} {
		r, ev := c.row(t, id), c.lastEvent(t, id)
		if r.State != outbox.StateDead || r.LastClass != outbox.ClassDeadline || ev.Outcome != outbox.OutcomeDeadline ||
			ev.Reason != "delivery deadline passed (1m after commit) with no try made (was its delivery job lost?) (sweep)" {
			t.Fatalf("swept row %d: %+v, last event %+v", id, r, ev)
		}
	}
	if r := c.row(t, daily); r.State != outbox.StatePending {
		t.Fatalf("the row with a day to go is %s", r.State)
	}
	sweep(0)

	// Retried: a fresh deadline, so the next sweep leaves it alone.
	if err := c.outbox.Retry(ctx, c.client, lost); err != nil {
		t.Fatal(err)
	}
	if r := c.row(t, lost); r.State != outbox.StatePending || !r.Deadline.Equal(stub.Now().Add(time.Minute)) {
		t.Fatalf("retried row: %+v, want pending until now + 1m", r)
	}
	sweep(0)

	// Lost again: the periodic sweeps, run on start, end it in its second
	// life (the delivery job itself is removed before it can run): the
	// deadline sweep, or, when the orphan sweep runs first, the job it
	// enqueues again, which finds the deadline passed (the same death,
	// without the sweep's mark; the order of the two is the machine's).
	if _, err := c.pool.Exec(ctx, "DELETE FROM river_job WHERE kind = 'crm_deliver'"); err != nil {
		t.Fatal(err)
	}
	stub.Advance(3 * time.Minute)
	changes := testwait.Changes(t, c.pool, "outbox")
	c.start(t)
	if !testwait.Until(20*time.Second, changes, func() bool { return c.row(t, lost).State == outbox.StateDead }) {
		t.Fatalf("the periodic sweep left row %d %s", lost, c.row(t, lost).State)
	}
	if ev := c.lastEvent(t, lost); strings.TrimSuffix(ev.Reason, " (sweep)") != "delivery deadline passed (1m after the operator's retry) with no try made (was its delivery job lost?)" ||
		ev.Outcome != outbox.OutcomeDeadline {
		t.Fatalf("second death: %+v", ev)
	}
	// The daily row, within its deadline but without a job for minutes,
	// is adopted on start (crm_orphan_sweep) and tried: with no target
	// configured, that try ends it, with why.
	if !testwait.Until(20*time.Second, changes, func() bool { return c.row(t, daily).State != outbox.StatePending }) {
		t.Fatalf("the adoption left row %d %s", daily, c.row(t, daily).State)
	}
	if r := c.row(t, daily); r.State != outbox.StateDead || r.LastClass != "config" {
		t.Fatalf("adopted row: %+v, want dead for want of a target", r)
	}
	counts, err := c.outbox.CountByState(ctx)
	if want := map[string]int64{outbox.StateDead: 3}; err != nil || !maps.Equal(counts, want) {
		t.Fatalf("count by state %v, %v; want %v", counts, err, want)
	}
}

// A row whose scope another delivery's throttling deferred far past the
// row's own deadline: its job snoozes only until that deadline, not for
// the scope's whole deferral, and dies then, saying it was never admitted.
func TestDispatcherSnoozesNoLaterThanTheDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stub := clock.NewStub(time.Now().UTC().Truncate(time.Second))
	crm, err := crmsim.New(crmsim.Config{Clock: stub})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(crm.Handler())
	defer srv.Close()
	tgt, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: crmsim.TokenDefault})
	if err != nil {
		t.Fatal(err)
	}
	const scope = "crm:acme:webhook"
	c := setupClocked(t, stub, outbox.Config{Destinations: map[string]outbox.Destination{
		"acme": {Name: "webhook", Scope: scope, Target: tgt, DeliveryDeadline: time.Minute},
	}}, false)
	if _, err := c.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: stub.Now().Add(time.Hour),
		Source: "retry-after", Reason: "another delivery was throttled"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.outbox.Commit(ctx, c.client, c.validated(t, "acme"), someActions)
	if err != nil {
		t.Fatal(err)
	}
	id := res.OutboxIDs[0]
	c.start(t)
	jobs := c.idle(t)
	if len(jobs) != 1 || jobs[0].State != rivertype.JobStateScheduled {
		t.Fatalf("jobs %+v, want one snoozed", jobs)
	}
	if wait := time.Until(jobs[0].ScheduledAt); wait > time.Minute+time.Second || wait < 50*time.Second {
		t.Fatalf("snoozed for %s, want about the minute left to the deadline (the scope is deferred for an hour)", wait)
	}
	c.tick(t, time.Minute)
	c.idle(t)
	r, ev := c.row(t, id), c.lastEvent(t, id)
	want := "delivery deadline passed (1m after commit) while the CRM kept throttling: its scope crm:acme:webhook stayed deferred and no try of this delivery was admitted"
	if r.State != outbox.StateDead || r.Attempts != 0 || ev.Reason != want {
		t.Fatalf("row %+v, last event %+v; want dead with %q", r, ev, want)
	}
	if st := crm.Stats(); st.Deliveries != 0 {
		t.Fatalf("the CRM saw %d deliveries, want none", st.Deliveries)
	}
	// Its job ended: no more tries.
	if jobs := c.deliveryJobs(t); len(jobs) != 1 || jobs[0].State != rivertype.JobStateCompleted {
		t.Fatalf("jobs %+v, want the one completed", jobs)
	}
}

// Migration 00005 gives rows committed before it a deadline a day after
// their commit, the default, and its down path removes the column again.
func TestMigrationGivesExistingRowsTheDefaultDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stub := clock.NewStub(time.Now().UTC().Truncate(time.Second))
	c := setupClocked(t, stub, outbox.Config{Destinations: map[string]outbox.Destination{
		"acme": {Name: "webhook", Scope: "crm:acme:webhook", DeliveryDeadline: time.Minute},
	}}, false)
	res, err := c.outbox.Commit(ctx, c.client, c.validated(t, "acme"), someActions)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(migrations.FS(), "00005_outbox_deadline.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, down, ok := strings.Cut(string(b), "-- +goose Down")
	if !ok {
		t.Fatal("00005 has no down part")
	}
	if _, err := c.pool.Exec(ctx, down); err != nil {
		t.Fatalf("00005 down: %v", err)
	}
	var n int
	if err := c.pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'deadline'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after 00005 down, %d deadline columns (%v)", n, err)
	}
	if _, err := c.pool.Exec(ctx, up); err != nil {
		t.Fatalf("00005 up: %v", err)
	}
	r := c.row(t, res.OutboxIDs[0])
	if !r.Deadline.Equal(r.CreatedAt.Add(24 * time.Hour)) {
		t.Fatalf("deadline %s of a row committed %s before the migration, want a day later", r.Deadline, r.CreatedAt)
	}
}
