package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

const workerEnv = "CALLSCRIBE_TEST_WORKER_DB"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorkerProcess())
	}
	// The tests fail when a goroutine they started is still running after
	// the last one.
	goleak.VerifyTestMain(m)
}

// Optional knobs of a worker process, beside the required workerEnv,
// CALLSCRIBE_TEST_AUDIO_ROOT and CALLSCRIBE_TEST_SIM_URL. Unset: the
// pipeline's defaults (or the crash test's values below).
const (
	workerBatchWorkersEnv = "CALLSCRIBE_TEST_BATCH_WORKERS" // River MaxWorkers of the batch queue
	workerPollIntervalEnv = "CALLSCRIBE_TEST_POLL_INTERVAL" // jobs.Config.PollInterval (default here 50ms)
	workerProbeWaitEnv    = "CALLSCRIBE_TEST_PROBE_WAIT"    // jobs.Config.ProbeWait
	workerBaseBackoffEnv  = "CALLSCRIBE_TEST_BASE_BACKOFF"  // retry_after.base_backoff
	workerMaxBackoffEnv   = "CALLSCRIBE_TEST_MAX_BACKOFF"   // retry_after.max_backoff
	workerClientIDEnv     = "CALLSCRIBE_TEST_WORKER_ID"     // the River client's ID (river_job.attempted_by)
	workerCRMURLEnv       = "CALLSCRIBE_TEST_CRM_URL"       // a crm-webhook/v1 receiver: commit and deliver through the outbox
	workerWindowPrefixEnv = "CALLSCRIBE_TEST_WINDOW_PREFIX" // scope windows in the test Redis under this key prefix
	workerManifestsEnv    = "CALLSCRIBE_TEST_MANIFESTS"     // "1": the batch lane sends manifests (manifestKnobs)
)

// manifestKnobs is the batch lane of a worker process with
// workerManifestsEnv: manifests formed quickly.
var manifestKnobs = jobs.BatchConfig{Manifests: true, MaxItems: 100, MaxWait: 100 * time.Millisecond, FormEvery: 50 * time.Millisecond,
	PollInterval: 100 * time.Millisecond}

// workerReady is printed on stdout once the worker's River client started.
const workerReady = "worker ready"

// runWorkerProcess is a worker process for the multi-process tests: it
// runs the pipeline against the given database, audio root and simulator
// until it is killed. Warnings and errors are logged on stderr.
func runWorkerProcess() int {
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(os.Getenv(workerEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// pgxpool's default (4 on a small machine) starves 10+ workers and
	// River's own services (leader election times out).
	pcfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, _ := ledger.New(pool, nil)
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + os.Getenv("CALLSCRIBE_TEST_AUDIO_ROOT")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := jobs.Config{
		Tenants:     map[string]jobs.TenantConfig{"t1": {Provider: "generic-http", BaseURL: os.Getenv("CALLSCRIBE_TEST_SIM_URL"), APIKey: "sim-key", Model: "general"}},
		StepTimeout: 30 * time.Second, RescueAfter: 31 * time.Second, PollInterval: 50 * time.Millisecond,
		RolloutDefault: ledger.RolloutEnforce,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if err := applyWorkerKnobs(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	deps := jobs.Deps{Store: store}
	if prefix := os.Getenv(workerWindowPrefixEnv); prefix != "" {
		rdb, err := testredis.Dial(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, OpTimeout: 2 * time.Second})
		if err == nil {
			deps.Window, err = capacity.NewWindows(r, capacity.WindowConfig{})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var dispatcher jobstest.Service // the outbox's, when there is a CRM
	if u := os.Getenv(workerCRMURLEnv); u != "" {
		tgt, err := connector.New(connector.Config{Kind: "webhook", BaseURL: u, Token: "crm-token"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ob, err := outbox.New(outbox.Config{Destinations: map[string]outbox.Destination{
			"t1": {Name: "webhook", Scope: "crm:t1:webhook", Target: tgt}}, ProbeWait: 50 * time.Millisecond,
			// A prompt try cut short by a kill leaves its row without a
			// job: the next worker's sweep gives it one soon.
			SweepInterval: 200 * time.Millisecond, OrphanAfter: time.Second}, pool, l)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		commitThrough(&deps, ob)
		dispatcher = ob
	}
	p, err := jobs.New(pool, l, cfg, deps)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("CALLSCRIBE_TEST_RESCUE_FAST") != "" {
		p.CapJobTimeouts(500 * time.Millisecond)
	}
	client, err := jobstest.NewClient(pool, p, dispatcher, func(c *river.Config) {
		if ob, ok := dispatcher.(*outbox.Outbox); ok {
			c.PeriodicJobs = append(c.PeriodicJobs, ob.PeriodicJobs()...)
		}
		if os.Getenv("CALLSCRIBE_TEST_RESCUE_FAST") != "" {
			c.JobTimeout = 500 * time.Millisecond
			c.RescueStuckJobsAfter = time.Second // the killed worker's job is stuck: take it over now
		}
		if id := os.Getenv(workerClientIDEnv); id != "" {
			c.ID = id
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := client.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(workerReady)
	select {}
}

// applyWorkerKnobs sets the fields of cfg that the worker knobs name.
func applyWorkerKnobs(cfg *jobs.Config) error {
	if os.Getenv(workerManifestsEnv) == "1" {
		cfg.Batch = manifestKnobs
	}
	if v := os.Getenv(workerBatchWorkersEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%q: want a positive number", workerBatchWorkersEnv, v)
		}
		cfg.BatchWorkers = n
	}
	for _, k := range []struct {
		env string
		d   *time.Duration
	}{
		{workerPollIntervalEnv, &cfg.PollInterval},
		{workerProbeWaitEnv, &cfg.ProbeWait},
		{workerBaseBackoffEnv, &cfg.RetryAfter.BaseBackoff},
		{workerMaxBackoffEnv, &cfg.RetryAfter.MaxBackoff},
	} {
		v := os.Getenv(k.env)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration", k.env, v)
		}
		*k.d = d
	}
	return nil
}

// A worker process is SIGKILLed right after the simulator accepted its
// submission. After a restart, the recording completes and the simulator
// transcribed it once: the new worker reconciled by key instead of paying
// for a second transcription.
func TestWorkerKilledAfterAcceptResumes(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, jobstest.LedgerTables...) // the worker processes' writes too
	root := t.TempDir()
	path := root + "/t1/call-1.wav"
	jobstest.WriteWAV(t, path, 2*time.Second, 7)

	var mu sync.Mutex
	var worker *exec.Cmd
	killed := make(chan struct{})
	var once sync.Once
	sim, err := sttsim.New(sttsim.Config{OnAccept: func(string) {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			_ = worker.Process.Kill() // SIGKILL: no goodbye, no cleanup
			close(killed)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()

	exe, _ := os.Executable()
	start := func(extra ...string) *exec.Cmd {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), workerEnv+"="+testdb.URLOf(t, pool), "CALLSCRIBE_TEST_AUDIO_ROOT="+root,
			"CALLSCRIBE_TEST_SIM_URL="+srv.URL)
		cmd.Env = append(cmd.Env, extra...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	// Ingest from this process (an insert-only client); a worker process runs it.
	l, _ := ledger.New(pool, nil)
	store, err := audio.Open(context.Background(), audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	p, err := jobs.New(pool, l, jobs.Config{Tenants: map[string]jobs.TenantConfig{"t1": {Provider: "generic-http", BaseURL: srv.URL, APIKey: "sim-key"}},
		RolloutDefault: ledger.RolloutEnforce},
		jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobstest.NewClient(pool, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Ingest(context.Background(), client, jobs.IngestRequest{TenantID: "t1", CallID: "call-1", Audio: path})
	if err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	worker = start()
	mu.Unlock()
	select {
	case <-killed:
	case <-time.After(60 * time.Second):
		t.Fatal("the simulator never accepted a submission")
	}
	_ = worker.Wait()
	rec, err := l.Recording(context.Background(), res.Recording.ID)
	if err != nil || rec.State != ledger.StateSubmitted {
		t.Fatalf("after the kill the recording is %s (%v), want submitted with no recorded answer", rec.State, err)
	}

	second := start("CALLSCRIBE_TEST_RESCUE_FAST=1")
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()
	done := func() bool {
		rec, err = l.Recording(context.Background(), res.Recording.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.State == ledger.StateValidated || rec.State.Terminal()
	}
	if !testwait.Until(60*time.Second, changes, done) || rec.State != ledger.StateValidated {
		var st string
		var attempt int
		var errs []byte
		_ = pool.QueryRow(context.Background(), "SELECT state, attempt, errors::text FROM river_job WHERE kind = 'transcribe'").Scan(&st, &attempt, &errs)
		t.Fatalf("after restart the recording is %s, want validated (river job %s attempt %d errors %s)", rec.State, st, attempt, errs)
	}
	if n := sim.Transcriptions(rec.BusinessKey); n != 1 {
		t.Fatalf("the simulator transcribed the recording %d times, want 1", n)
	}
	evs, _ := l.Events(context.Background(), rec.ID)
	reconciled := false
	for _, ev := range evs {
		if ev.Reason == "reconciled: the vendor had the submission" {
			reconciled = true
		}
	}
	if !reconciled || rec.Attempt != 1 {
		t.Fatalf("attempt %d, reconciled %v; want one submission and a reconcile event", rec.Attempt, reconciled)
	}
	if _, err := ledger.Replay(evs); err != nil {
		t.Fatal(err)
	}
}
