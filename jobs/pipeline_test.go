package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// env is a pipeline setup built (jobstest.Env).
type env struct {
	pool     *pgxpool.Pool
	ledger   *ledger.Ledger
	pipeline *jobs.Pipeline
	client   *river.Client[pgx.Tx]
	sim      *sttsim.Server
	root     string
	// changes fires after each write to recordings or scope_deferrals, by
	// this process or a worker process.
	changes <-chan struct{}
}

// setup builds a pipeline against a fresh database, an audio root with n
// recordings, and a stt-http simulator with the given trouble.
func setup(t testing.TB, simCfg sttsim.Config, cfg jobs.Config, n int) (*env, []string) {
	t.Helper()
	return setupWith(t, simCfg, cfg, n, jobs.Deps{})
}

// setupWith is setup with the pipeline's deps (the store is setup's):
// jobstest.Setup, its fields under the names jobs' tests use.
func setupWith(t testing.TB, simCfg sttsim.Config, cfg jobs.Config, n int, deps jobs.Deps) (*env, []string) {
	t.Helper()
	e, files := jobstest.Setup(t, simCfg, cfg, n, deps)
	return &env{pool: e.Pool, ledger: e.Ledger, pipeline: e.Pipeline, client: e.Client, sim: e.Sim, root: e.Root, changes: e.Changes}, files
}

// ingestAll ingests files as tenant t1's calls call-000, call-001, ... on
// the lane the rule picks, and returns the recordings' ids in order.
func (e *env) ingestAll(t *testing.T, files []string) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, len(files))
	for i, f := range files {
		res, err := e.pipeline.Ingest(context.Background(), e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.Recording.ID
	}
	return ids
}

func (e *env) start(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := e.client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.client.StopAndCancel(ctx)
	})
}

// waitSettled waits until no recording is unfinished, or fails.
func (e *env) waitSettled(t *testing.T, within time.Duration) map[ledger.State]int {
	t.Helper()
	var counts map[ledger.State]int
	settled := func() bool {
		var err error
		if counts, err = e.ledger.CountByState(context.Background()); err != nil {
			t.Fatal(err)
		}
		open := 0
		for s, n := range counts {
			if !s.Terminal() && s != ledger.StateValidated {
				open += n
			}
		}
		return open == 0
	}
	if !testwait.Until(within, e.changes, settled) {
		t.Fatalf("recordings still open after %s: %v", within, counts)
	}
	return counts
}

// waitRecording waits until recording id satisfies ok, or fails.
func (e *env) waitRecording(t *testing.T, id uuid.UUID, within time.Duration, what string, ok func(ledger.Recording) bool) ledger.Recording {
	t.Helper()
	var rec ledger.Recording
	if !testwait.Until(within, e.changes, func() bool {
		var err error
		if rec, err = e.ledger.Recording(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return ok(rec)
	}) {
		t.Fatalf("recording %s is %s after %s, want %s", rec.CallID, rec.State, within, what)
	}
	return rec
}

func (e *env) checkHistories(t *testing.T) {
	t.Helper()
	recs, err := e.ledger.Recordings(context.Background(), ledger.RecordingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		evs, err := e.ledger.Events(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := ledger.Replay(evs)
		if err != nil || snap != r.Snapshot() {
			t.Fatalf("recording %s: history does not replay to its row: %v (%+v vs %+v)", r.CallID, err, snap, r.Snapshot())
		}
	}
}

func TestPipelineHappyPath(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{AsyncShare: 0.5, ProcessingTime: 100 * time.Millisecond, PollRetryAfter: "0"}, jobs.Config{}, 12)
	e.start(t)
	ctx := context.Background()
	for i, f := range files {
		lane := ledger.LaneBatch
		if i%3 == 0 {
			lane = ledger.LaneImmediate
		}
		res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f, Lane: lane})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Created || res.JobID == 0 {
			t.Fatalf("ingest %d: %+v", i, res)
		}
	}
	// Ingesting again converges and enqueues nothing new.
	again, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: "call-000", Audio: files[0]})
	if err != nil || again.Created {
		t.Fatalf("re-ingest: %+v, %v", again, err)
	}
	counts := e.waitSettled(t, 30*time.Second)
	if counts[ledger.StateValidated] != len(files) {
		t.Fatalf("states %v, want all %d validated", counts, len(files))
	}
	st := e.sim.Stats()
	for key, n := range st.Transcriptions {
		if n != 1 {
			t.Errorf("%s transcribed %d times", key, n)
		}
	}
	rec, err := e.ledger.RecordingByKey(ctx, "t1", "call-001", jobstest.FileDigest(t, files[1]))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.ledger.Transcript(ctx, rec.ID)
	if err != nil || tr.Text != "call number 1: the rate sheet goes out on Friday" {
		t.Fatalf("transcript = %q, %v", tr.Text, err)
	}
	e.checkHistories(t)
}

// A 429 storm: after the simulator announced a cooldown for the scope, no
// submission admitted after the announcement arrives before its deadline.
func TestPipelineRespectsRetryAfter(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{RateLimitShare: 0.3, Cooldown: 300 * time.Millisecond, RetryAfterForm: sttsim.FormMixed},
		jobs.Config{BatchWorkers: 10}, 30)
	e.start(t)
	ctx := context.Background()
	for i, f := range files {
		if _, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f}); err != nil {
			t.Fatal(err)
		}
	}
	counts := e.waitSettled(t, 60*time.Second)
	if counts[ledger.StateValidated] != len(files) {
		failed, _ := e.ledger.Recordings(ctx, ledger.RecordingFilter{State: ledger.StateFailed})
		for _, r := range failed {
			evs, _ := e.ledger.Events(ctx, r.ID)
			t.Logf("failed %s: %s", r.CallID, evs[len(evs)-1].Reason)
		}
		t.Fatalf("states %v, want all validated", counts)
	}
	st := e.sim.Stats()
	if st.RateLimited == 0 {
		t.Fatal("the simulator never throttled: the test proves nothing")
	}
	scope := e.pipeline.Config().Tenants["t1"].Scope
	exts, err := e.ledger.ScopeDeferralExtensions(ctx, scope)
	if err != nil || len(exts) == 0 {
		t.Fatalf("no deferral recorded for %s (%v)", scope, err)
	}
	acc := checkCooldowns(t, e.ledger)
	t.Logf("429s: %d, cooldowns: %d, arrivals inside a cooldown the vendor had announced: %d, in flight by the exact rule: %d",
		st.RateLimited, len(st.Cooldowns), len(st.Violations), acc.InFlight)
	for i := 1; i < len(exts); i++ {
		if exts[i].ResultingNotBefore.Before(exts[i-1].ResultingNotBefore) {
			t.Fatalf("scope deadline moved backward: %s after %s", exts[i].ResultingNotBefore, exts[i-1].ResultingNotBefore)
		}
	}
	e.checkHistories(t)
}

// Validation compares the transcript with the duration ingest measured and
// the ledger keeps, without reading the audio again; a recording whose
// duration is unknown (NULL: ingested before the ledger kept durations)
// validates without the duration check, and its event says so.
func TestValidateUsesTheDurationMeasuredAtIngest(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{}, jobs.Config{}, 3)
	ctx := context.Background()
	var ids []uuid.UUID
	for i, f := range files {
		res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f})
		if err != nil {
			t.Fatal(err)
		}
		if want := 2*time.Second + time.Duration(i%5)*100*time.Millisecond; res.Recording.AudioDuration != want {
			t.Fatalf("ingested duration %s, want %s (from the WAV header)", res.Recording.AudioDuration, want)
		}
		ids = append(ids, res.Recording.ID)
	}
	// 0: as measured. 1: a stored duration far from the audio's: the check
	// must use it (the file says 2.1s). 2: unknown.
	if _, err := e.pool.Exec(ctx, "UPDATE recordings SET audio_duration_ms = 60000 WHERE id = $1", ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "UPDATE recordings SET audio_duration_ms = NULL WHERE id = $1", ids[2]); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	done := func(r ledger.Recording) bool { return r.State == ledger.StateValidated || r.State.Terminal() }
	for _, id := range ids {
		e.waitRecording(t, id, 30*time.Second, "validated or failed", done)
	}
	last := func(id uuid.UUID) ledger.Event {
		evs := events(t, e.ledger, id)
		return evs[len(evs)-1]
	}
	if ev := last(ids[0]); ev.New != ledger.StateValidated || ev.Detail["audio_duration"] != nil {
		t.Fatalf("measured recording: last event %+v, want validated with no note", ev)
	}
	if ev := last(ids[1]); ev.New != ledger.StateFailed || ev.ResponseClass != "validation_duration" {
		t.Fatalf("recording with a 60s stored duration: last event %+v, want failed validation_duration", ev)
	}
	if ev := last(ids[2]); ev.New != ledger.StateValidated || ev.Detail["audio_duration"] != "unknown: duration check skipped" {
		t.Fatalf("recording of unknown duration: last event %+v, want validated noting the skipped check", ev)
	}
}
