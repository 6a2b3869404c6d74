package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// processOutput collects what a worker process writes and closes ready
// when it has printed workerReady.
type processOutput struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func newProcessOutput() *processOutput { return &processOutput{ready: make(chan struct{})} }

func (o *processOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.buf.Write(b)
	if strings.Contains(o.buf.String(), workerReady) {
		o.once.Do(func() { close(o.ready) })
	}
	return n, err
}

func (o *processOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// startWorkerProcess starts this test binary as a worker process (see
// runWorkerProcess) with the given knobs, waits until its River client
// runs, and kills it when the test ends (before the database is dropped).
// What it wrote is logged if the test failed.
func startWorkerProcess(t *testing.T, pool *pgxpool.Pool, root, simURL string, knobs ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+testdb.URLOf(t, pool), "CALLSCRIBE_TEST_AUDIO_ROOT="+root,
		"CALLSCRIBE_TEST_SIM_URL="+simURL)
	cmd.Env = append(cmd.Env, knobs...)
	out := newProcessOutput()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-exited
		if t.Failed() {
			t.Logf("worker process %v (%v) wrote:\n%s", knobs, err, out.String())
		}
	})
	select {
	case <-out.ready:
	case err := <-exited:
		exited <- err
		t.Fatalf("worker process exited before it was ready: %v\n%s", err, out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("worker process not ready after 30s:\n%s", out.String())
	}
}

// The acceptance test: two worker processes with 10 batch workers
// each (20 in all) share one scope while the vendor throttles 30% of the
// submissions with every Retry-After form. Every recording ends
// validated and is transcribed once; no process admits a submission after
// the platform (either process) had recorded a deadline it arrives before;
// the scope deadline never moves backward; every history replays.
func TestTwoWorkerProcessesShareOneScopeIn429Storm(t *testing.T) {
	t.Parallel()
	const n = 40
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, jobstest.LedgerTables...) // the worker processes' writes
	root := t.TempDir()
	expected := map[string]string{}
	var files []string
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("t1/call-%03d.wav", i))
		jobstest.WriteWAV(t, p, 2*time.Second+time.Duration(i%5)*100*time.Millisecond, i+3)
		expected[jobstest.FileDigest(t, p)] = fmt.Sprintf("call number %d: the pickup window moves to Thursday", i)
		files = append(files, p)
	}
	sim, err := sttsim.New(sttsim.Config{RateLimitShare: 0.3, Cooldown: 400 * time.Millisecond,
		RetryAfterForm: sttsim.FormMixed, ExpectedText: expected})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	workerIDs := []string{"worker-a", "worker-b"}
	for _, id := range workerIDs {
		startWorkerProcess(t, pool, root, srv.URL,
			workerBatchWorkersEnv+"=10", workerPollIntervalEnv+"=50ms", workerProbeWaitEnv+"=50ms",
			workerBaseBackoffEnv+"=20ms", workerMaxBackoffEnv+"=200ms", workerClientIDEnv+"="+id)
	}

	// This process only ingests (an insert-only River client), with the
	// workers' tenant configuration, so it derives the same scope.
	ctx := context.Background()
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	p, err := jobs.New(pool, l, jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"t1": {Provider: "generic-http", BaseURL: srv.URL, APIKey: "sim-key", Model: "general"}},
		RolloutDefault: ledger.RolloutEnforce}, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobstest.NewClient(pool, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	scope := p.Config().Tenants["t1"].Scope
	for i, f := range files {
		if _, err := p.Ingest(ctx, client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f}); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{pool: pool, ledger: l, pipeline: p, client: client, sim: sim, root: root, changes: changes}
	counts := e.waitSettled(t, 90*time.Second) // 10-25s on an idle machine
	if counts[ledger.StateValidated] != n {
		t.Fatalf("states %v, want all %d validated", counts, n)
	}

	st := sim.Stats()
	if st.RateLimited == 0 {
		t.Fatal("the simulator never throttled: the test proves nothing")
	}
	announced := 0
	for _, c := range st.Cooldowns {
		if c.Announced() {
			announced++
		}
	}
	if announced == 0 {
		t.Fatalf("none of the %d cooldowns was announced with a usable Retry-After", len(st.Cooldowns))
	}
	if len(st.Transcriptions) != n {
		t.Errorf("the simulator transcribed %d keys, want %d", len(st.Transcriptions), n)
	}
	for key, k := range st.Transcriptions {
		if k != 1 {
			t.Errorf("%s transcribed %d times, want 1", key, k)
		}
	}

	// Both processes drove recordings: the work was shared, not done by
	// whichever started first.
	rows, err := pool.Query(ctx, "SELECT DISTINCT a FROM river_job, unnest(attempted_by) a WHERE kind = 'transcribe' ORDER BY a")
	if err != nil {
		t.Fatal(err)
	}
	by, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(by, workerIDs) {
		t.Errorf("transcribe jobs were worked by %v, want both of %v", by, workerIDs)
	}

	exts, err := l.ScopeDeferralExtensions(ctx, scope)
	if err != nil || len(exts) < 2 {
		t.Fatalf("no deferral recorded for %s (%v)", scope, err)
	}
	acc := checkCooldowns(t, l)
	t.Logf("%d submissions, 429s: %d, cooldowns: %d (%d announced), deferral offers: %d; the vendor saw %d arrivals inside cooldowns it had announced, the ledger counts %d in flight",
		st.Submissions, st.RateLimited, len(st.Cooldowns), announced, len(exts), len(st.Violations), acc.InFlight)
	for i := 1; i < len(exts); i++ {
		if exts[i].ResultingNotBefore.Before(exts[i-1].ResultingNotBefore) {
			t.Fatalf("scope deadline moved backward: offer %d left %s after offer %d left %s",
				exts[i].ID, exts[i].ResultingNotBefore, exts[i-1].ID, exts[i-1].ResultingNotBefore)
		}
	}
	e.checkHistories(t)
}
