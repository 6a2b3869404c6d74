package outbox_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// replayBed is a database holding n committed action sets of tenant t1,
// whose production CRM (prod) has an outbox row of each that nothing
// delivers, and an outbox with the replay target "staging" (its own
// scope) in front of stg.
type replayBed struct {
	*bundle
	ob     *outbox.Outbox
	prod   *crmsim.Server
	stg    *crmsim.Server
	sets   int
	window *capacity.Windows
}

const (
	prodScope    = "crm:t1:webhook"
	stagingScope = "crm:replay:staging"
)

func newReplayBed(t *testing.T, n int, stgCfg crmsim.Config, cfg outbox.Config) *replayBed {
	t.Helper()
	ctx := context.Background()
	prod, _ := crmsim.New(crmsim.Config{})
	prodSrv := httptest.NewServer(prod.Handler())
	t.Cleanup(prodSrv.Close)
	prodTgt, err := connector.New(connector.Config{Kind: "webhook", BaseURL: prodSrv.URL, Token: "crm-token"})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, map[string]outbox.Destination{"t1": {Name: "webhook", Scope: prodScope, Target: prodTgt}})
	for range n {
		if _, err := b.outbox.Commit(ctx, b.client, b.validated(t, "t1"), someActions); err != nil {
			t.Fatal(err)
		}
	}
	stgCfg.Tokens = []string{"stg"}
	stg, err := crmsim.New(stgCfg)
	if err != nil {
		t.Fatal(err)
	}
	stgSrv := httptest.NewServer(stg.Handler())
	t.Cleanup(stgSrv.Close)
	stgTgt, err := connector.New(connector.Config{Kind: "webhook", BaseURL: stgSrv.URL, Token: "stg"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReplayTargets = map[string]outbox.ReplayTarget{
		"staging": {Target: stgTgt, Scope: stagingScope},
		"live":    {Target: prodTgt, Scope: "crm:replay:live", Production: true},
	}
	if cfg.ProbeWait == 0 {
		cfg.ProbeWait = 50 * time.Millisecond
	}
	return &replayBed{bundle: b, ob: mustOutbox(t, cfg, b.pool, b.ledger), prod: prod, stg: stg, sets: n, window: cfg.Window}
}

// work starts a River client that works the replay queue only (as
// `replay --wait` does) with ob's workers, stopped when the test ends.
func (rb *replayBed) work(t *testing.T, ob *outbox.Outbox) *river.Client[pgx.Tx] {
	t.Helper()
	workers := river.NewWorkers()
	ob.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(rb.pool), &river.Config{Workers: workers,
		Queues: map[string]river.QueueConfig{outbox.ReplayQueue: ob.Queues()[outbox.ReplayQueue]}, FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.StopAndCancel(context.Background()) })
	return client
}

func (rb *replayBed) start(t *testing.T, opts outbox.ReplayStartOptions) int64 {
	t.Helper()
	if opts.Target == "" {
		opts.Target = "staging"
	}
	if opts.From.IsZero() {
		opts.From, opts.To = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	opts.StartedBy = "test@host"
	id, err := rb.ob.ReplayStart(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitRun waits for run id to end (changes: its tables' writes).
func (rb *replayBed) waitRun(t *testing.T, id int64, within time.Duration, changes <-chan struct{}) outbox.ReplayRun {
	t.Helper()
	var run outbox.ReplayRun
	ended := func() bool {
		var err error
		if run, err = rb.ob.ReplayRunByID(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return !run.Active()
	}
	if !testwait.Until(within, changes, ended) {
		t.Fatalf("replay run %d did not end within %s: %+v\nstaging CRM: %+v", id, within, run, rb.stg.Stats())
	}
	return run
}

// One run of 320 committed recordings into a staging CRM that throttles
// (10 % 429 with Retry-After), fails (5 % 5xx) and loses answers after
// applying (5 %): every set ends in the target once, no try is sent inside
// a cooldown the run knew of, nothing is dead, no action version is new,
// and production's CRM, scope and queue are untouched. No re-run. Not in
// parallel with the package's other tests: its minute of 320 deliveries
// under -race would crowd their timing.
func TestReplayRunAgainstAThrottlingStagingCRM(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "replay")
	window, err := capacity.NewWindows(capRedis(t, rdb, prefix), capacity.WindowConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 320
	rb := newReplayBed(t, n, crmsim.Config{RateLimitShare: 0.10, Cooldown: 300 * time.Millisecond, ServerErrorShare: 0.05,
		DropAfterApplyShare: 0.05}, outbox.Config{Window: window, ReplayWorkers: 8, ReplayChunk: 37})
	changes := testwait.Changes(t, rb.pool, "replay_runs", "replay_deliveries")
	client := rb.work(t, rb.ob)

	id := rb.start(t, outbox.ReplayStartOptions{})
	if err := rb.ob.ReplayEnumerate(ctx, client, id, nil); err != nil {
		t.Fatal(err)
	}
	run := rb.waitRun(t, id, 5*time.Minute, changes)
	st := rb.stg.Stats()
	rep := run.Report
	t.Logf("run %d: %s in %s; report %+v; staging CRM: %d deliveries, %d 429s (%d cooldowns), %d 5xx, %d drops",
		id, run.State, run.FinishedAt.Sub(run.CreatedAt).Round(time.Millisecond), rep, st.Deliveries, st.RateLimited, st.Cooldowns,
		st.ServerErrors, st.Drops)

	if run.State != outbox.RunDone || run.Enumerated != n || rep.RecordingsReplayed != n || rep.Deliveries != n || rep.Pending != 0 {
		t.Fatalf("run %+v: want done with %d recordings and deliveries, none pending", run, n)
	}
	if rep.Dead != 0 || rep.NewActionVersions != 0 || rep.Sends.IgnoredKnownCooldown != 0 || rep.Sends.Sends != int(rep.Tries) {
		t.Fatalf("report %+v: want 0 dead, 0 new action versions, 0 sends inside a known cooldown, every try judged", rep)
	}
	// Each set applied exactly once, by key, with no conflicting body.
	if st.Applied != n || st.Conflicts != 0 {
		t.Fatalf("staging holds %d sets (%d conflicts), want %d and 0", st.Applied, st.Conflicts, n)
	}
	for key, c := range st.ApplyCount {
		if c != 1 {
			t.Fatalf("staging applied %s %d times", key, c)
		}
	}
	// The run's figures are the CRM's: an answer lost after applying
	// comes back as a replay on the retry.
	if rep.CRMEffectsCreated != int64(st.Applied-st.Drops) || rep.CRMEffectsCreated+rep.AnsweredAsReplays != n {
		t.Fatalf("effects created %d, answered as replays %d; the CRM applied %d and lost %d answers", rep.CRMEffectsCreated,
			rep.AnsweredAsReplays, st.Applied, st.Drops)
	}
	// Every try either ended its delivery or put it back in line,
	// throttled (a 429, or a 503 with Retry-After) or transient (another
	// 5xx, a lost answer); every 429 the CRM answered was counted.
	if rep.Tries != n+rep.Throttled+rep.Transient || rep.Throttled < int64(st.RateLimited) || st.RateLimited == 0 || rep.Transient == 0 {
		t.Fatalf("tries %d, throttled %d, transient %d; the CRM saw %d deliveries (%d dropped), answered %d 429s and %d 5xx",
			rep.Tries, rep.Throttled, rep.Transient, st.Deliveries, st.Drops, st.RateLimited, st.ServerErrors)
	}
	// One audit event per try (withdrawn ones too), and one per set on
	// its outbox row.
	if rep.AuditEventsAppended != rep.Tries+rep.Withdrawn+n {
		t.Fatalf("audit events %d, want tries %d + withdrawn %d + %d", rep.AuditEventsAppended, rep.Tries, rep.Withdrawn, n)
	}
	// Production: its CRM saw nothing, its scope was never deferred, its
	// delivery rows are still pending (the replay queue's workers never
	// take production's jobs).
	if ps := rb.prod.Stats(); ps.Deliveries != 0 {
		t.Fatalf("production CRM got %d deliveries from a replay into staging", ps.Deliveries)
	}
	if d, err := rb.ledger.ScopeDeferral(ctx, prodScope); err != nil || !d.NotBefore.IsZero() {
		t.Fatalf("production's CRM scope: %+v, %v; want never deferred", d, err)
	}
	if counts, err := rb.ob.CountByState(ctx); err != nil || counts[outbox.StatePending] != n {
		t.Fatalf("production outbox rows by state: %v, %v; want all %d pending", counts, err, n)
	}
	// The staging scope's deferrals were recorded: the run honoured them.
	if d, err := rb.ledger.ScopeDeferral(ctx, stagingScope); err != nil || d.NotBefore.IsZero() {
		t.Fatalf("staging scope %+v, %v: want deferred by the CRM's 429s", d, err)
	}
}

// A rate ceiling spaces the run's sends by at least 1/max-rate, whatever
// the target would take: exactly, by the slots the database handed out.
func TestReplayRunRateCeiling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, rate = 30, 25.0
	rb := newReplayBed(t, n, crmsim.Config{}, outbox.Config{ReplayWorkers: 8})
	changes := testwait.Changes(t, rb.pool, "replay_runs", "replay_deliveries")
	client := rb.work(t, rb.ob)
	id := rb.start(t, outbox.ReplayStartOptions{MaxRate: rate})
	if err := rb.ob.ReplayEnumerate(ctx, client, id, nil); err != nil {
		t.Fatal(err)
	}
	run := rb.waitRun(t, id, 2*time.Minute, changes)
	if run.State != outbox.RunDone || run.Report.CRMEffectsCreated != n {
		t.Fatalf("run %+v", run)
	}
	slots, err := rb.ob.ReplayRateSlots(ctx, id)
	if err != nil || len(slots) != int(run.Report.Tries) {
		t.Fatalf("%d rate slots for %d tries: %v", len(slots), run.Report.Tries, err)
	}
	gap := time.Duration(float64(time.Second) / rate)
	for i := 1; i < len(slots); i++ {
		if d := slots[i].Sub(slots[i-1]); d < gap-time.Microsecond {
			t.Fatalf("slots %d and %d are %s apart, want at least %s", i-1, i, d, gap)
		}
	}
}

// Two processes enumerating one run at once enqueue each recording once:
// the cursor is compared and set in each chunk's transaction.
func TestReplayEnumerateConcurrentlyEnqueuesEachRecordingOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 61
	rb := newReplayBed(t, n, crmsim.Config{}, outbox.Config{ReplayChunk: 7})
	id := rb.start(t, outbox.ReplayStartOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- rb.ob.ReplayEnumerate(ctx, rb.client, id, nil) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Finished recordings are re-driven by their chunk's transaction: each
	// committed set is a delivery with one job, and no re-drive job.
	run, err := rb.ob.ReplayRunByID(ctx, id)
	if err != nil || run.State != outbox.RunRunning || run.Enumerated != n || run.Report.RecordingsReplayed != n || run.Report.Deliveries != n {
		t.Fatalf("run %+v, %v: want running with %d enumerated, re-driven and deliveries", run, err, n)
	}
	var deliver, redrive int
	if err := rb.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'replay_deliver'), count(*) FILTER (WHERE kind = 'replay_recording')
		FROM river_job WHERE (args->>'run_id')::bigint = $1`, id).Scan(&deliver, &redrive); err != nil || deliver != n || redrive != 0 {
		t.Fatalf("%d delivery jobs, %d re-drive jobs, %v; want %d and 0", deliver, redrive, err, n)
	}
}

// A resume while the run's deliveries are being worked (a second
// `replay resume`, or one that finished enumerating as the workers went
// on) enqueues no second job for any delivery: the pending read and the
// insert hold the deliveries' rows, so no job settles and completes
// between them.
func TestReplayResumeWhileDeliveringEnqueuesNoSecondJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 300
	rb := newReplayBed(t, n, crmsim.Config{}, outbox.Config{})
	changes := testwait.Changes(t, rb.pool, "replay_runs", "replay_deliveries")
	id := rb.start(t, outbox.ReplayStartOptions{})
	if err := rb.ob.ReplayEnumerate(ctx, rb.client, id, nil); err != nil {
		t.Fatal(err)
	}
	rb.work(t, rb.ob)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var resumes atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := rb.ob.ReplayEnumerate(ctx, rb.client, id, nil); err != nil {
					t.Error(err)
					return
				}
				resumes.Add(1)
			}
		})
	}
	run := rb.waitRun(t, id, 2*time.Minute, changes)
	close(stop)
	wg.Wait()
	if run.State != outbox.RunDone || run.Report.CRMEffectsCreated != n {
		t.Fatalf("run %+v: want done with %d effects", run, n)
	}
	var jobs, sets int
	if err := rb.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT args->>'action_set_id') FROM river_job
		WHERE kind = 'replay_deliver' AND (args->>'run_id')::bigint = $1`, id).Scan(&jobs, &sets); err != nil {
		t.Fatal(err)
	}
	if jobs != n || sets != n {
		t.Fatalf("%d replay_deliver jobs for %d sets after %d resumes during delivery; want one for each of %d", jobs, sets, resumes.Load(), n)
	}
	t.Logf("%d resumes while %d deliveries were worked; one job each", resumes.Load(), n)
}

// A cancelled run stops: its pending deliveries are cancelled, its jobs
// end at their next turn without sending, and it cannot be cancelled twice.
func TestReplayRunCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 40
	// Every delivery is throttled: the run stays pending until cancelled.
	rb := newReplayBed(t, n, crmsim.Config{RateLimitShare: 1, Cooldown: time.Second}, outbox.Config{ReplayWorkers: 4})
	changes := testwait.Changes(t, rb.pool, "replay_runs", "replay_deliveries")
	client := rb.work(t, rb.ob)
	id := rb.start(t, outbox.ReplayStartOptions{})
	if err := rb.ob.ReplayEnumerate(ctx, client, id, nil); err != nil {
		t.Fatal(err)
	}
	throttled := func() bool {
		run, err := rb.ob.ReplayRunByID(ctx, id)
		return err == nil && run.Report.Deliveries == n && run.Report.Throttled > 0
	}
	if !testwait.Until(time.Minute, changes, throttled) {
		t.Fatal("no delivery throttled within a minute")
	}
	cancelled, err := rb.ob.ReplayCancel(ctx, id, "test")
	if err != nil || cancelled == 0 {
		t.Fatalf("cancel: %d, %v", cancelled, err)
	}
	if _, err := rb.ob.ReplayCancel(ctx, id, "again"); !errors.Is(err, outbox.ErrRunNotActive) {
		t.Fatalf("cancelling a cancelled run: %v", err)
	}
	if _, err := rb.ob.ReplayCancel(ctx, id+1000, "none"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("cancelling no run: %v", err)
	}
	run, err := rb.ob.ReplayRunByID(ctx, id)
	if err != nil || run.State != outbox.RunCancelled || run.Report.Pending != 0 || run.Report.Cancelled != cancelled ||
		run.Report.Cancelled+run.Report.Dead+run.Report.CRMEffectsCreated+run.Report.AnsweredAsReplays != n {
		t.Fatalf("after cancel: %+v, %v", run, err)
	}
	// Its jobs end: none is left waiting in the replay queue.
	idle := func() bool {
		var active int
		_ = rb.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state NOT IN ('completed', 'cancelled', 'discarded')`,
			outbox.ReplayQueue).Scan(&active)
		return active == 0
	}
	jobsChanged := testwait.Changes(t, rb.pool, "river_job")
	if !testwait.Until(time.Minute, jobsChanged, idle) {
		t.Fatal("replay jobs still active a minute after the cancel")
	}
}

// Guards: a production target needs AllowProduction, an unknown target, an
// empty window and a rate out of range are refused, saying which.
func TestReplayStartRefuses(t *testing.T) {
	t.Parallel()
	rb := newReplayBed(t, 1, crmsim.Config{}, outbox.Config{})
	now := time.Now()
	for _, c := range []struct {
		opts outbox.ReplayStartOptions
		want string
	}{
		{outbox.ReplayStartOptions{Target: "live"}, "production"},
		{outbox.ReplayStartOptions{Target: "nope"}, "not configured"},
		{outbox.ReplayStartOptions{Target: "staging", From: now, To: now}, "empty"},
		{outbox.ReplayStartOptions{Target: "staging", MaxRate: -1}, "max rate"},
		{outbox.ReplayStartOptions{Target: "staging", State: "nonsense"}, "not one of"},
	} {
		opts := c.opts
		if opts.From.IsZero() {
			opts.From, opts.To = now.Add(-time.Hour), now.Add(time.Hour)
		}
		opts.StartedBy = "test@host"
		_, err := rb.ob.ReplayStart(context.Background(), opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReplayStart(%+v) = %v, want an error saying %q", c.opts, err, c.want)
		}
	}
	opts := outbox.ReplayStartOptions{Target: "live", AllowProduction: true, From: now.Add(-time.Hour), To: now.Add(time.Hour), StartedBy: "t@h"}
	if _, err := rb.ob.ReplayStart(context.Background(), opts); err != nil {
		t.Fatalf("production with AllowProduction: %v", err)
	}
}

// A run over unfinished recordings re-ingests each once (the pipeline
// then runs it under its normal admission) and counts it replayed.
func TestReplayRunReingestsUnfinishedRecordings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	reingested := map[string]int{}
	cfg := outbox.Config{Reingest: func(_ context.Context, rec ledger.Recording) error {
		mu.Lock()
		defer mu.Unlock()
		reingested[rec.CallID]++
		return nil
	}}
	rb := newReplayBed(t, 3, crmsim.Config{}, cfg) // 3 committed: not in the run
	const unfinished = 5
	for range unfinished {
		rb.validated(t, "t1")
	}
	changes := testwait.Changes(t, rb.pool, "replay_runs", "replay_deliveries")
	client := rb.work(t, rb.ob)
	id := rb.start(t, outbox.ReplayStartOptions{State: ledger.StateValidated})
	if err := rb.ob.ReplayEnumerate(ctx, client, id, nil); err != nil {
		t.Fatal(err)
	}
	run := rb.waitRun(t, id, time.Minute, changes)
	mu.Lock()
	defer mu.Unlock()
	if run.State != outbox.RunDone || run.Report.RecordingsReplayed != unfinished || run.Report.Deliveries != 0 || len(reingested) != unfinished {
		t.Fatalf("run %+v; re-ingested %v: want %d recordings re-ingested once each, no deliveries", run, reingested, unfinished)
	}
	for call, n := range reingested {
		if n != 1 {
			t.Fatalf("%s re-ingested %d times", call, n)
		}
	}
}

// A delivery whose job is gone is not left pending: resuming the run
// enqueues its job again, and a delivery past its deadline with no job is
// ended by the sweep, dead with why; either way the run ends.
func TestReplayRunLostJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 6
	rb := newReplayBed(t, n, crmsim.Config{}, outbox.Config{SweepGrace: time.Millisecond})
	changes := testwait.Changes(t, rb.pool, "replay_runs", "replay_deliveries")
	// A run whose recordings were re-driven but whose delivery jobs are
	// all gone (discarded, cancelled by hand).
	id := rb.start(t, outbox.ReplayStartOptions{})
	if _, err := rb.pool.Exec(ctx, `UPDATE replay_runs SET state = 'running', enumerated = $2, redriven = $2 WHERE id = $1`, id, n); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.pool.Exec(ctx, `INSERT INTO replay_deliveries (run_id, action_set_id, deadline, created_at, updated_at)
		SELECT $1, id, now() + interval '1 hour', now(), now() FROM action_sets`, id); err != nil {
		t.Fatal(err)
	}
	// Resumed: every pending delivery has its job again.
	if err := rb.ob.ReplayEnumerate(ctx, rb.client, id, nil); err != nil {
		t.Fatal(err)
	}
	rb.work(t, rb.ob)
	run := rb.waitRun(t, id, time.Minute, changes)
	if run.State != outbox.RunDone || run.Report.CRMEffectsCreated != n || rb.stg.Stats().Applied != n {
		t.Fatalf("resumed run %+v; staging holds %d", run, rb.stg.Stats().Applied)
	}

	// A delivery past its deadline with no job: the sweep ends it.
	var lost int64
	if err := rb.pool.QueryRow(ctx, `INSERT INTO replay_runs (target, scope, recording_state, window_from, window_to, started_by,
		delivery_deadline, state, created_at, updated_at) VALUES ('staging', $1, 'committed', now() - interval '1 day', now(), 't@h',
		interval '1 hour', 'running', now(), now()) RETURNING id`, stagingScope).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.pool.Exec(ctx, `INSERT INTO replay_deliveries (run_id, action_set_id, deadline, created_at, updated_at)
		SELECT $1, min(id), now() - interval '1 minute', now(), now() FROM action_sets`, lost); err != nil {
		t.Fatal(err)
	}
	swept, err := rb.ob.SweepReplays(ctx)
	if err != nil || swept != 1 {
		t.Fatalf("sweep: %d, %v; want 1", swept, err)
	}
	r, err := rb.ob.ReplayRunByID(ctx, lost)
	if err != nil || r.State != outbox.RunDone || r.Report.Dead != 1 || len(r.Report.DeadList) != 1 ||
		!strings.Contains(r.Report.DeadList[0].Reason, "was its job lost?") {
		t.Fatalf("after the sweep: %+v, %v", r, err)
	}
}
