package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/outbox"
)

// peerWorkers splits callscribe's workers as callscribe does: the
// vendor's queue gets the immediate and batch lanes' workers, the CRM's
// the outbox dispatcher's.
func peerWorkers() (transcribe, deliver int) {
	cfg := jobs.Config{}.WithDefaults()
	return cfg.ImmediateWorkers + cfg.BatchWorkers, outbox.WorkersDefault
}

// peerResult is what runPeer measured and what it left.
type peerResult struct {
	run    *throughputRun
	crm    *crmsim.Server
	states string // the peer's recordings by state, at the end
}

// runPeer measures the peer (peer_bench_test.go) as pipeline measures
// callscribe: on a fresh database (River's tables and the peer's schema),
// with newBenchDoubles and writeRecordings' n recordings in one manifest,
// the peer's ingest process timed, then its worker process from its start
// until every delivery is delivered, database commits
// (pg_stat_database.xact_commit less the harness's own queries),
// machine-wide CPU of each step and the worker run's own CPU, the worker's
// peak RSS.
func runPeer(tb testing.TB, n int) peerResult {
	tb.Helper()
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	pool := testdb.NewEmpty(tb)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		tb.Fatalf("migrating River's tables: %v", err)
	}
	if _, err := pool.Exec(ctx, peerSchema); err != nil {
		tb.Fatalf("creating the peer's schema: %v", err)
	}
	dir := tb.TempDir()
	suffix := randHex(tb, 4)
	tenant, apiKey, token := "peer"+suffix, "key-"+suffix, "token-"+suffix
	expected := writeRecordings(tb, dir, tenant, n)
	doubles := newBenchDoubles(tb, apiKey, token, expected)
	transcribe, deliver := peerWorkers()
	cfg, err := json.Marshal(peerConfig{
		DatabaseURL: testdb.URLOf(tb, pool), AudioRoot: dir, Manifest: writeManifests(tb, dir, tenant, n, 1)[0],
		STTURL: doubles.sttURL, STTAPIKey: apiKey, CRMURL: doubles.crmURL, CRMToken: token,
		TranscribeWorkers: transcribe, DeliverWorkers: deliver,
	})
	if err != nil {
		tb.Fatal(err)
	}
	process := func(role string, out *syncBuffer) *exec.Cmd {
		cmd := exec.Command(exe) //nolint:gosec // this test binary, as a peer process
		cmd.Env = append(os.Environ(), peerRoleEnv+"="+role, peerConfigEnv+"="+string(cfg))
		cmd.Stdout, cmd.Stderr = out, out
		return cmd
	}
	bench, _ := tb.(*testing.B)

	run := &throughputRun{n: n}
	q := &benchQueries{b: tb, pool: pool}
	settle := func() { time.Sleep(1500 * time.Millisecond) } // as pipeline's: the statistics collector's delay
	c0 := q.commits()
	cpu0 := machineBusy(tb)
	ingestStart := time.Now()
	var ingestLog syncBuffer
	if err := runBounded(process("ingest", &ingestLog), 5*time.Minute+time.Duration(n)*5*time.Millisecond); err != nil {
		tb.Fatalf("the peer's ingest: %v\n%s", err, tail(ingestLog.String()))
	}
	run.ingestRate = float64(n) / time.Since(ingestStart).Seconds()
	run.ingestCPU = cpuPer(cpu0, machineBusy(tb), n)
	settle()
	c1 := q.commits()
	run.ingestCommits = float64(c1-c0-q.take()) / float64(n)

	var workerLog syncBuffer
	worker := process("worker", &workerLog)
	if bench != nil {
		bench.ResetTimer()
	}
	cpu1, idle1, self1 := machineBusy(tb), machineIdle(tb), selfCPU(tb)
	start := time.Now()
	if err := worker.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = worker.Process.Kill()
			tb.Logf("the peer's worker killed: %v", <-exited)
		}
	}()
	failf := func(format string, args ...any) {
		tb.Helper()
		tb.Fatalf("%s\nthe peer's recordings by state: %s\nworker log:\n%s", fmt.Sprintf(format, args...), q.peerStates(), tail(workerLog.String()))
	}
	bound := 2*time.Minute + time.Duration(n)*20*time.Millisecond
	deadline := time.After(bound)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-exited:
			stopped = true
			failf("the peer's worker exited early: %v", err)
		case <-deadline:
			failf("%d of %d deliveries delivered after %s", q.peerDelivered(), n, bound)
		case <-tick.C:
			if q.peerDelivered() == n {
				break wait
			}
		}
	}
	if bench != nil {
		bench.StopTimer()
	}
	run.workerCPU, run.workerIdle = cpuPer(cpu1, machineBusy(tb), n), cpuPer(idle1, machineIdle(tb), n)
	run.ownWorker = processCPU(worker.Process.Pid) / float64(n)
	run.ownDB = q.backendsCPU() / float64(n)
	run.ownDoubles = (selfCPU(tb) - self1) / float64(n)
	run.ownCPU = run.ownWorker + run.ownDB + run.ownDoubles
	run.peakRSS = vmHWM(tb, worker.Process.Pid)
	run.rate = float64(n) / q.peerLastDelivery().Sub(start).Seconds()
	run.delivered = q.peerDelivered()
	if err := worker.Process.Signal(os.Interrupt); err != nil {
		tb.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			failf("the peer's worker exited with %v after Ctrl-C", err)
		}
	case <-time.After(time.Minute):
		failf("the peer's worker did not stop within a minute of Ctrl-C")
	}
	states := q.peerStates()
	settle()
	c2 := q.commits()
	run.workerCommits = float64(c2-c1-q.take()) / float64(n)
	run.jobs = q.jobsPerRecording(n)
	return peerResult{run: run, crm: doubles.crm, states: states}
}

func (q *benchQueries) peerDelivered() int {
	var n int
	q.scan("SELECT count(*) FROM peer.deliveries WHERE state = 'delivered'", nil, &n)
	return n
}

func (q *benchQueries) peerLastDelivery() time.Time {
	var t time.Time
	q.scan("SELECT max(delivered_at) FROM peer.deliveries WHERE state = 'delivered'", nil, &t)
	return t
}

func (q *benchQueries) peerStates() string {
	var s string
	q.scan("SELECT coalesce(string_agg(state || ' ' || n, ', ' ORDER BY state), 'none') FROM (SELECT state, count(*) n FROM peer.recordings GROUP BY state) c", nil, &s)
	return s
}

// TestPeerPipelineDeliversEachOnce runs BenchmarkThroughput's peer, its
// ingest and worker processes, on a few recordings: every recording ends
// delivered, the CRM double applies each set once and refuses none.
func TestPeerPipelineDeliversEachOnce(t *testing.T) {
	t.Parallel()
	const n = 40
	res := runPeer(t, n)
	if want := fmt.Sprintf("delivered %d", n); res.states != want {
		t.Errorf("the peer's recordings by state: %s, want %s", res.states, want)
	}
	st := res.crm.Stats()
	if st.Applied != n || st.Deliveries != n || st.Invalid != 0 || st.Conflicts != 0 || st.Unauthorized != 0 {
		t.Errorf("the CRM double: %d applied of %d deliveries (%d invalid, %d conflicts, %d unauthorized), want %d of %d and no refusal",
			st.Applied, st.Deliveries, st.Invalid, st.Conflicts, st.Unauthorized, n, n)
	}
	for key, c := range st.ApplyCount {
		if c != 1 || !strings.HasPrefix(key, "peer") || !strings.HasSuffix(key, ":1") {
			t.Errorf("key %s applied %d times, want a tenant:call:1 key applied once", key, c)
		}
	}
	r := res.run
	t.Logf("the peer on %d recordings: %.0f recordings/s, %.1f commits per recording, CPU ms per recording %.2f machine-wide, %.2f its own processes'",
		n, r.rate, r.ingestCommits+r.workerCommits, r.ingestCPU+r.workerCPU, r.ownCPU)
	if r.delivered != n || r.rate <= 0 || r.ingestRate <= 0 || r.peakRSS <= 0 || r.ownCPU <= 0 {
		t.Errorf("the run measured %d delivered, %.1f recordings/s, ingest %.1f recordings/s, peak RSS %d, own CPU %.2f ms per recording; want %d and positive figures",
			r.delivered, r.rate, r.ingestRate, r.peakRSS, r.ownCPU, n)
	}
}
