package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/outbox"
)

// The sizes of the throughput runs.
const (
	benchSmall  = 1_000
	benchMedium = 10_000
	benchLarge  = 100_000
	// benchHold is how long the worker runs with benchLarge recordings
	// queued before its peak RSS is read.
	benchHold = 20 * time.Second
	// benchIngestParts: the benchLarge recordings are ingested by this
	// many `ingest --manifest` processes at once.
	benchIngestParts = 4
	// benchPlan is the doubles' concurrency plan, configured as the
	// vendor's capacity limit and the CRM scope's window target: the
	// pipeline's windows grow to it, as they would to a real plan.
	benchPlan = 32
	// benchText is what the vendor double hears in every recording: one
	// follow-up, so each recording ends in one CRM delivery.
	benchText = "Thanks for the call. I'll send you the rate sheet for Chicago to Dallas and Memphis to Atlanta by Friday."
)

// BenchmarkThroughput is `make bench`'s harness, in one sitting on one
// database server:
//
//   - RiverNoop: River at its best, bare no-op jobs inserted with
//     InsertMany before the clock, as many workers in all as the pipeline
//     run has (immediate + batch + crm queues), FetchCooldown at River's
//     minimum (river.FetchCooldownMin, 1ms) → jobs/s.
//   - Pipeline/1000 and Pipeline/10000: `callscribe ingest --manifest`
//     (timed: the ingest rate), then a `callscribe worker` process, built
//     from this tree and run with the defaults (benchPlan configured as the
//     doubles' plan), against zero-latency,
//     never-failing doubles over HTTP (the stt-http/v1 simulator and the
//     crm-webhook/v1 simulator, served by this process) until every
//     recording's outbox row is delivered → recordings/s received →
//     delivered (worker start to the last delivery), database commits per
//     recording (pg_stat_database.xact_commit, ingest and worker, less
//     this harness's own queries), the worker's peak RSS (VmHWM), and
//     receipt → CRM delivery p50 and p99 (recording created_at, or the
//     worker's start when it was queued before, to the outbox row's
//     delivery), and the machine's busy CPU milliseconds per recording
//     (/proc/stat: user + nice + system + irq + softirq + steal, every
//     process on the machine: the worker, PostgreSQL, this process's
//     doubles), of the ingest and of the worker's run; and of the
//     worker's run the CPU of the run's own processes only (the worker,
//     the database's backends, this process: processCPU), which other
//     work on a shared machine does not inflate; and the machine's idle
//     milliseconds per recording in the worker's run (idle + iowait):
//     near 0 when the CPU bounds the run, high when its processes wait on
//     one another (one group commit in flight at a time left a two-core
//     machine 16 % idle).
//   - Peer/1000 and Peer/10000, each after callscribe's run of the same
//     size: the hand-rolled River pipeline of peer_bench_test.go, the
//     alternative to callscribe at its best (two jobs per recording, a
//     transaction per step, none of callscribe's guarantees), as processes
//     like callscribe's (its ingest, timed, then its worker), with as many
//     workers, the same doubles (newBenchDoubles), recordings and manifest,
//     measured the same way (runPeer). The table prints callscribe's
//     throughput, ingest rate and CPU per recording as multiples of the
//     peer's: the price of callscribe's guarantees on this machine.
//   - Queued/100000 (BENCH_LARGE=1): 100,000 recordings ingested the
//     same way (by benchIngestParts ingest processes at once), the worker
//     run for benchHold, its peak RSS against the 1,000 run's.
//
// Each run has a fresh database (internal/testdb), a tenant, API key and
// CRM token of its own (so Redis holds fresh scope windows). Every wait is
// bounded: a run that does not finish fails with the recordings' states
// and the worker's log. BENCH_CPUPROFILE=FILE writes the worker's CPU
// profile of the 10,000 run (`callscribe worker --cpuprofile`), and
// BENCH_PEER_CPUPROFILE=FILE the peer worker's of its last run. When the
// server preloads pg_stat_statements, the top 10 statements by total time
// of the 10,000 run are printed. Run it with -benchtime 1x:
//
//	make bench  (or: go run ./internal/cmd/testenv -- go test -run '^$' -bench Throughput -benchtime 1x -timeout 60m ./cmd/callscribe/cli/)
func BenchmarkThroughput(b *testing.B) {
	rig := &benchRig{bin: filepath.Join(b.TempDir(), "callscribe"), runs: map[int]*throughputRun{}, peers: map[int]*throughputRun{}}
	build := exec.Command("go", "build", "-o", rig.bin, "github.com/callscribe/callscribe/cmd/callscribe")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building callscribe: %v\n%s", err, out)
	}
	cfg := jobs.Config{}.WithDefaults()
	rig.maxWorkers = cfg.ImmediateWorkers + cfg.BatchWorkers + outbox.WorkersDefault
	rig.peerTranscribe, rig.peerDeliver = peerWorkers()
	if p := os.Getenv("BENCH_CPUPROFILE"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			b.Fatal(err)
		}
		rig.cpuProfile = abs
	}
	b.Run("RiverNoop", func(b *testing.B) { rig.riverNoop(b, benchMedium) })
	b.Run("CommitFloor", func(b *testing.B) { rig.commitFloor(b) })
	b.Run("Pipeline/1000", func(b *testing.B) { rig.pipeline(b, benchSmall, 0) })
	b.Run("Peer/1000", func(b *testing.B) { rig.peer(b, benchSmall) })
	b.Run("Pipeline/10000", func(b *testing.B) { rig.pipeline(b, benchMedium, 0) })
	b.Run("Peer/10000", func(b *testing.B) { rig.peer(b, benchMedium) })
	if os.Getenv("BENCH_LARGE") != "" {
		b.Run("Queued/100000", func(b *testing.B) { rig.pipeline(b, benchLarge, benchHold) })
	}
	if !b.Failed() {
		rig.print()
	}
}

// benchRig holds the harness's binary and what each run measured.
type benchRig struct {
	bin        string
	maxWorkers int
	cpuProfile string
	riverRate  float64 // jobs/s
	floorRate  float64 // sets of floorCommits commits/s
	runs       map[int]*throughputRun
	peers      map[int]*throughputRun // the hand-rolled River pipeline's runs (peer_bench_test.go)
	statements []string               // pg_stat_statements' top lines of the 10,000 run, or why none
	// peerTranscribe and peerDeliver are the peer's two queues' workers
	// (peerWorkers: maxWorkers in all).
	peerTranscribe, peerDeliver int
}

// throughputRun is what one pipeline run measured.
type throughputRun struct {
	n             int
	ingestRate    float64 // recordings/s through `ingest --manifest`
	rate          float64 // recordings/s, worker start to the last delivery (0 for a held run)
	ingestCommits float64 // per recording
	workerCommits float64 // per recording
	ingestCPU     float64 // ms per recording, machine-wide, during the ingest
	workerCPU     float64 // ms per recording, machine-wide, worker start to the last delivery seen
	workerIdle    float64 // ms per recording the machine's CPUs sat idle, the same span (machineIdle)
	ownCPU        float64 // ms per recording, the same span, the run's own processes only (see processCPU)
	// ownCPU's parts: the worker process, its PostgreSQL backends, and
	// this process (the STT and CRM doubles).
	ownWorker, ownDB, ownDoubles float64
	peakRSS                      int64 // bytes, the worker's VmHWM
	delivered                    int
	jobs                         string // River jobs per recording by kind (jobsPerRecording)
	// Redis during the worker's run, per recording: scripts run
	// (EVAL and EVALSHA) and the server's CPU ms.
	redisScripts, redisCPU float64
	latency                []laneLatency
}

// laneLatency is receipt → CRM delivery of one lane ("all" for both).
type laneLatency struct {
	lane     string
	n        int
	p50, p99 time.Duration
}

type benchNoop struct{}

func (benchNoop) Kind() string { return "bench_noop" }

type benchNoopWorker struct {
	river.WorkerDefaults[benchNoop]
	done chan struct{}
}

func (w *benchNoopWorker) Work(context.Context, *river.Job[benchNoop]) error {
	w.done <- struct{}{}
	return nil
}

// riverNoop times n bare jobs from Start to the last completed.
func (r *benchRig) riverNoop(b *testing.B, n int) {
	pool := testdb.New(b)
	ctx := context.Background()
	w := &benchNoopWorker{done: make(chan struct{}, n)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.maxWorkers}},
		Workers:           workers,
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: benchNoop{}}
	}
	for start := 0; start < n; start += 1000 {
		if _, err := client.InsertMany(ctx, params[start:min(start+1000, n)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = client.StopAndCancel(ctx) }()
	timeout := time.After(2 * time.Minute)
	for i := range n {
		select {
		case <-w.done:
		case <-timeout:
			b.Fatalf("River: %d of %d no-op jobs done after 2 minutes", i, n)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	r.riverRate = float64(n) / elapsed.Seconds()
	b.ReportMetric(r.riverRate, "jobs/s")
	b.ReportMetric(float64(r.maxWorkers), "max-workers")
}

// floorCommits is how many durable commits a recording needs at the least:
// submitted before the vendor call, the transcript's commit, the delivery
// try before the CRM call and its outcome.
const floorCommits = 4

// commitFloor measures what the server can commit at the least per
// recording, beside River in the same sitting: as many connections as the
// pipeline has workers, each committing floorCommits single-row UPDATEs
// (autocommit, no trigger, no event, no River job) on random rows of a
// plain table, for floorFor → sets/s. A pipeline that commits per
// recording cannot pass it; its ratio to River bounds the pipeline's.
func (r *benchRig) commitFloor(b *testing.B) {
	const rows, floorFor = 100_000, 10 * time.Second
	ctx := context.Background()
	base := testdb.New(b)
	cfg, err := pgxpool.ParseConfig(testdb.URLOf(b, base))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(r.maxWorkers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_floor (id integer PRIMARY KEY, v integer NOT NULL DEFAULT 0, at timestamptz)`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO bench_floor (id) SELECT generate_series(1, $1::integer)`, rows); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	stop := time.Now().Add(floorFor)
	sets := make(chan int, r.maxWorkers)
	errs := make(chan error, r.maxWorkers)
	start := time.Now()
	for w := range r.maxWorkers {
		go func() {
			n := 0
			for id := w*7919%rows + 1; time.Now().Before(stop); id = (id+104729)%rows + 1 {
				for range floorCommits {
					if _, err := pool.Exec(ctx, `UPDATE bench_floor SET v = v + 1, at = now() WHERE id = $1`, id); err != nil {
						errs <- err
						sets <- n
						return
					}
				}
				n++
			}
			sets <- n
		}()
	}
	total := 0
	for range r.maxWorkers {
		total += <-sets
	}
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	r.floorRate = float64(total) / elapsed.Seconds()
	b.ReportMetric(r.floorRate, "sets/s")
}

// pipeline ingests n recordings and runs a worker process on them: until
// all are delivered (hold 0), or for hold.
func (r *benchRig) pipeline(b *testing.B, n int, hold time.Duration) {
	pool := testdb.New(b)
	dbURL := testdb.URLOf(b, pool)
	dir := b.TempDir()
	suffix := randHex(b, 4)
	tenant, apiKey, token := "bench"+suffix, "key-"+suffix, "token-"+suffix
	expected := writeRecordings(b, dir, tenant, n)

	doubles := newBenchDoubles(b, apiKey, token, expected)
	config := filepath.Join(dir, "callscribe.yaml")
	body := fmt.Sprintf(`database_url: %q
redis_url: %q
log: {level: warn}
audio: {root: %q}
pipeline:
  rollout_default: enforce
  tenants:
    %s:
      provider: generic-http
      base_url: %q
      api_key: %q
      crm: {kind: webhook, base_url: %q, token: %q}
capacity:
  # The doubles' plans: the vendor takes benchPlan transcriptions at once
  # (the scope's window grows to it), the CRM as many deliveries.
  limits: {"generic-http/stt": {limit: %d}}
  window: {start_target: %d}
`, dbURL, testredis.URL(), dir, tenant, doubles.sttURL, apiKey, doubles.crmURL, token, benchPlan, benchPlan)
	// BENCH_LEDGER, when set, is the ledger section (YAML flow), e.g.
	// '{group_commit: {max_items: 1}}' to run without group commit.
	if v := os.Getenv("BENCH_LEDGER"); v != "" {
		body += "ledger: " + v + "\n"
	}
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "CALLSCRIBE_DATABASE_URL="+dbURL, "CALLSCRIBE_REDIS_URL="+testredis.URL())

	run := &throughputRun{n: n}
	q := &benchQueries{b: b, pool: pool}
	// The statistics collector reports a backend's counts within a second
	// of its commits, and at its exit.
	settle := func() { time.Sleep(1500 * time.Millisecond) }
	c0 := q.commits()
	cpu0 := machineBusy(b)

	// Ingest, timed, as an operator runs it; the 100,000 recordings in
	// benchIngestParts manifests at once (the same command, tables and
	// jobs), as one manifest takes minutes with a row at a time.
	parts := 1
	if n >= benchLarge {
		parts = benchIngestParts
	}
	manifests := writeManifests(b, dir, tenant, n, parts)
	ingestStart := time.Now()
	errs := make(chan error, parts)
	for _, m := range manifests {
		go func() {
			ingest := exec.Command(r.bin, "--config", config, "ingest", "--manifest", m)
			ingest.Env = env
			var out bytes.Buffer
			ingest.Stdout, ingest.Stderr = &out, &out
			if err := runBounded(ingest, 5*time.Minute+time.Duration(n)*5*time.Millisecond); err != nil {
				errs <- fmt.Errorf("callscribe ingest --manifest %s: %w\n%s", m, err, tail(out.String()))
				return
			}
			errs <- nil
		}()
	}
	for range manifests {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	run.ingestRate = float64(n) / time.Since(ingestStart).Seconds()
	run.ingestCPU = cpuPer(cpu0, machineBusy(b), n)
	settle()
	c1 := q.commits()
	run.ingestCommits = float64(c1-c0-q.take()) / float64(n)

	profiled := n == benchMedium
	statements := profiled && r.resetStatements(b, q)
	args := []string{"--config", config, "worker"}
	if profiled && r.cpuProfile != "" {
		args = append(args, "--cpuprofile", r.cpuProfile)
	}
	worker := exec.Command(r.bin, args...)
	worker.Env = env
	var workerLog syncBuffer
	worker.Stdout, worker.Stderr = &workerLog, &workerLog
	b.ResetTimer()
	cpu1, idle1, self1 := machineBusy(b), machineIdle(b), selfCPU(b)
	rs1 := redisStats(b)
	start := time.Now()
	if err := worker.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = worker.Process.Kill()
			b.Logf("worker killed: %v", <-exited)
		}
	}()
	failf := func(format string, args ...any) {
		b.Helper()
		b.Fatalf("%s\nrecordings by state: %s\nworker log:\n%s", fmt.Sprintf(format, args...), q.states(), tail(workerLog.String()))
	}

	bound := 2*time.Minute + time.Duration(n)*20*time.Millisecond
	deadline := time.After(bound)
	if hold > 0 {
		deadline = time.After(hold)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-exited:
			stopped = true
			failf("the worker exited early: %v", err)
		case <-deadline:
			if hold > 0 {
				break wait
			}
			failf("%d of %d recordings delivered after %s", q.delivered(), n, bound)
		case <-tick.C:
			if hold == 0 && q.delivered() == n {
				break wait
			}
		}
	}
	b.StopTimer()
	run.workerCPU, run.workerIdle = cpuPer(cpu1, machineBusy(b), n), cpuPer(idle1, machineIdle(b), n)
	run.ownWorker = processCPU(worker.Process.Pid) / float64(n)
	run.ownDB = q.backendsCPU() / float64(n)
	run.ownDoubles = (selfCPU(b) - self1) / float64(n)
	run.ownCPU = run.ownWorker + run.ownDB + run.ownDoubles
	rs2 := redisStats(b)
	run.redisScripts, run.redisCPU = (rs2.Scripts-rs1.Scripts)/float64(n), 1000*(rs2.CPU-rs1.CPU)/float64(n)
	run.peakRSS = vmHWM(b, worker.Process.Pid)
	if hold == 0 {
		last := q.lastDelivery()
		run.rate = float64(n) / last.Sub(start).Seconds()
		run.latency = q.latency(start)
	}
	run.delivered = q.delivered()
	if err := worker.Process.Signal(os.Interrupt); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			failf("the worker exited with %v after Ctrl-C", err)
		}
	case <-time.After(time.Minute):
		failf("the worker did not stop within a minute of Ctrl-C")
	}
	if statements {
		r.statements = q.topStatements()
	}
	settle()
	c2 := q.commits()
	run.workerCommits = float64(c2-c1-q.take()) / float64(n)
	run.jobs = q.jobsPerRecording(n)
	if applied := doubles.crm.Stats().Applied; hold == 0 && applied != n {
		b.Fatalf("the CRM double applied %d action sets, want %d", applied, n)
	}

	r.runs[n] = run
	if hold == 0 {
		b.ReportMetric(run.rate, "recordings/s")
		if r.riverRate > 0 {
			b.ReportMetric(run.rate/r.riverRate, "ratio-to-river")
		}
		for _, l := range run.latency {
			if l.lane == "all" {
				b.ReportMetric(float64(l.p50.Milliseconds()), "p50-ms")
				b.ReportMetric(float64(l.p99.Milliseconds()), "p99-ms")
			}
		}
	}
	b.ReportMetric(run.ingestCommits+run.workerCommits, "db-commits/recording")
	b.ReportMetric(run.ingestRate, "ingest-recordings/s")
	if hold == 0 {
		b.ReportMetric(run.ingestCPU+run.workerCPU, "cpu-ms/recording")
		b.ReportMetric(run.workerIdle, "idle-ms/recording")
		b.ReportMetric(run.ownCPU, "own-cpu-ms/recording")
	}
	b.ReportMetric(float64(run.peakRSS)/(1<<20), "peak-RSS-MiB")
	if small := r.runs[benchSmall]; small != nil && small.peakRSS > 0 && n != benchSmall {
		b.ReportMetric(float64(run.peakRSS)/float64(small.peakRSS), "RSS-ratio-to-1k")
	}
}

// benchDoubles are one run's HTTP doubles, served by this process and
// configured the same for callscribe and the peer: the stt-http/v1
// simulator (the run's API key, the text each recording holds, zero
// latency, no trouble, every answer synchronous, batches offered) and the
// crm-webhook/v1 simulator (the run's token, zero latency, no trouble).
type benchDoubles struct {
	sttURL, crmURL string
	crm            *crmsim.Server
}

func newBenchDoubles(tb testing.TB, apiKey, token string, expected map[string]string) *benchDoubles {
	sim, err := sttsim.New(sttsim.Config{APIKeys: []string{apiKey}, ExpectedText: expected})
	if err != nil {
		tb.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	tb.Cleanup(stt.Close)
	crmSim, err := crmsim.New(crmsim.Config{Tokens: []string{token}})
	if err != nil {
		tb.Fatal(err)
	}
	crmSrv := httptest.NewServer(crmSim.Handler())
	tb.Cleanup(crmSrv.Close)
	return &benchDoubles{sttURL: stt.URL, crmURL: crmSrv.URL, crm: crmSim}
}

// peer runs the hand-rolled River pipeline (peer_bench_test.go) on n
// recordings, measured as pipeline measures callscribe (runPeer).
func (r *benchRig) peer(b *testing.B, n int) {
	res := runPeer(b, n)
	if applied := res.crm.Stats().Applied; applied != n {
		b.Fatalf("the CRM double applied %d action sets of the peer's, want %d", applied, n)
	}
	run := res.run
	r.peers[n] = run
	b.ReportMetric(run.rate, "recordings/s")
	b.ReportMetric(run.ingestCommits+run.workerCommits, "db-commits/recording")
	b.ReportMetric(run.ingestRate, "ingest-recordings/s")
	b.ReportMetric(run.ingestCPU+run.workerCPU, "cpu-ms/recording")
	b.ReportMetric(run.workerIdle, "idle-ms/recording")
	b.ReportMetric(run.ownCPU, "own-cpu-ms/recording")
	b.ReportMetric(float64(run.peakRSS)/(1<<20), "peak-RSS-MiB")
}

// clockTicks is USER_HZ, the unit of /proc/stat's times: 100 on Linux
// whatever the kernel's HZ.
const clockTicks = 100

// machineBusy is the machine's busy CPU time so far, in clockTicks, from
// /proc/stat's first line: user + nice + system + irq + softirq + steal
// (guest time is inside user already; idle and iowait are not busy).
func machineBusy(tb testing.TB) int64 {
	return procStatCPU(tb, 1, 2, 3, 6, 7, 8) // user nice system (idle iowait) irq softirq steal
}

// machineIdle is the machine's idle CPU time so far, in clockTicks: idle +
// iowait. Over a run that the CPU bounds it stays near 0; a run whose
// processes wait on one another (a lock, one commit in flight) leaves it
// high however fast the cores.
func machineIdle(tb testing.TB) int64 { return procStatCPU(tb, 4, 5) }

// procStatCPU sums the given fields of /proc/stat's first line (the
// machine's cpu line), in clockTicks.
func procStatCPU(tb testing.TB, fields ...int) int64 {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatalf("reading the machine's CPU time: %v", err)
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat begins %q, want the cpu line with at least 8 times", line)
	}
	var sum int64
	for _, i := range fields {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			tb.Fatalf("/proc/stat cpu field %d %q: %v", i, f[i], err)
		}
		sum += v
	}
	return sum
}

// selfCPU is this process's user + system CPU time so far, in
// milliseconds: the doubles and the harness.
func selfCPU(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("reading this process's CPU time: %v", err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// processCPU is process pid's user + system CPU time so far, in
// milliseconds, from /proc/PID/stat (utime and stime, the 14th and 15th
// fields); 0 when the process is gone. With the worker's and the
// backends' (benchQueries.backendsCPU) and selfCPU it is a run's own CPU:
// what the machine-wide figure would be on a machine running nothing
// else, less PostgreSQL's shared processes (WAL writer, checkpointer).
func processCPU(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing one, which is followed by field 3 (the state).
	_, rest, ok := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(utime+stime) * 1000 / clockTicks
}

// backendsCPU is the CPU time, in milliseconds, of the PostgreSQL backends
// now serving the run's database, less the harness's own (application
// name testdb.ApplicationName).
func (q *benchQueries) backendsCPU() float64 {
	q.b.Helper()
	q.count++
	rows, err := q.pool.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name <> $1`, testdb.ApplicationName)
	if err != nil {
		q.b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		q.b.Fatal(err)
	}
	total := 0.0
	for _, pid := range pids {
		total += processCPU(int(pid))
	}
	return total
}

// cpuPer is the busy CPU milliseconds per recording between two
// machineBusy readings.
func cpuPer(from, to int64, n int) float64 {
	return float64(to-from) * 1000 / clockTicks / float64(n)
}

// writeRecordings writes n small distinct WAV files under dir/tenant and
// returns the text the vendor double hears in each, by digest.
func writeRecordings(b testing.TB, dir, tenant string, n int) map[string]string {
	expected := make(map[string]string, n)
	for i := range n {
		p := filepath.Join(dir, benchAudio(tenant, i))
		if i%1000 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		audio := benchWAV(i)
		if err := os.WriteFile(p, audio, 0o600); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(audio)
		expected[hex.EncodeToString(sum[:])] = benchText
	}
	return expected
}

// benchAudio is recording i's path under the recordings root.
func benchAudio(tenant string, i int) string {
	return fmt.Sprintf("%s/%03d/call-%06d.wav", tenant, i/1000, i)
}

// writeManifests writes manifests naming writeRecordings' n recordings
// (lanes alternating), split into parts files, and returns their paths.
func writeManifests(b testing.TB, dir, tenant string, n, parts int) []string {
	bufs := make([]bytes.Buffer, parts)
	for i := range n {
		lane := "batch"
		if i%2 == 0 {
			lane = "immediate"
		}
		line, err := json.Marshal(map[string]string{"tenant_id": tenant, "call_id": fmt.Sprintf("call-%06d", i), "audio": benchAudio(tenant, i), "lane": lane})
		if err != nil {
			b.Fatal(err)
		}
		buf := &bufs[i*parts/n]
		buf.Write(line)
		buf.WriteByte('\n')
	}
	paths := make([]string, parts)
	for k := range bufs {
		paths[k] = filepath.Join(dir, fmt.Sprintf("manifest-%d.jsonl", k))
		if err := os.WriteFile(paths[k], bufs[k].Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return paths
}

// benchWAV is a quarter second of 8 kHz 16-bit mono whose first sample
// frames hold i, so every recording has its own digest.
func benchWAV(i int) []byte {
	const rate, frames = 8000, 2000
	data := make([]byte, 2*frames)
	for j := range frames {
		binary.LittleEndian.PutUint16(data[2*j:], uint16((j*7+i)%2000))
	}
	binary.LittleEndian.PutUint32(data, uint32(i))
	var w []byte
	w = append(w, "RIFF"...)
	w = binary.LittleEndian.AppendUint32(w, uint32(36+len(data)))
	w = append(w, "WAVEfmt "...)
	w = binary.LittleEndian.AppendUint32(w, 16)
	w = binary.LittleEndian.AppendUint16(w, 1)
	w = binary.LittleEndian.AppendUint16(w, 1)
	w = binary.LittleEndian.AppendUint32(w, rate)
	w = binary.LittleEndian.AppendUint32(w, rate*2)
	w = binary.LittleEndian.AppendUint16(w, 2)
	w = binary.LittleEndian.AppendUint16(w, 16)
	w = append(w, "data"...)
	w = binary.LittleEndian.AppendUint32(w, uint32(len(data)))
	return append(w, data...)
}

// benchQueries are the harness's reads of a run's database; it counts
// them, as each is a commit pg_stat_database counts too.
type benchQueries struct {
	b     testing.TB
	pool  *pgxpool.Pool
	count int64
}

// take returns the queries counted since the last take.
func (q *benchQueries) take() int64 {
	n := q.count
	q.count = 0
	return n
}

func (q *benchQueries) scan(sql string, args []any, dest ...any) {
	q.b.Helper()
	q.count++
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.pool.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		q.b.Fatalf("%s: %v", sql, err)
	}
}

func (q *benchQueries) commits() int64 {
	var n int64
	q.scan("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()", nil, &n)
	return n
}

func (q *benchQueries) delivered() int {
	var n int
	q.scan("SELECT count(*) FROM outbox WHERE state = 'delivered'", nil, &n)
	return n
}

// redisStats reads the scripts run and the CPU used by the Redis the
// bench's processes share.
func redisStats(tb testing.TB) testredis.ServerStats {
	return testredis.Stats(tb, testredis.Client(tb))
}

// jobsPerRecording lists the River jobs the run inserted per recording,
// by kind (completed jobs are kept for a day, so all are still there),
// with the times they were worked (River counts a snooze as a run),
// e.g. "transcribe 1.00 (1.04 runs), crm_deliver 0.12 (0.12 runs)".
func (q *benchQueries) jobsPerRecording(n int) string {
	var s string
	q.scan(`SELECT coalesce(string_agg(kind || ' ' || to_char(c::float8 / $1, 'FM990.00') || ' (' || to_char(a::float8 / $1, 'FM990.00') || ' runs)', ', ' ORDER BY c DESC, kind), 'none')
	FROM (SELECT kind, count(*) c, sum(attempt) a FROM river_job GROUP BY kind) k`, []any{n}, &s)
	return s
}

func (q *benchQueries) lastDelivery() time.Time {
	var t time.Time
	q.scan("SELECT max(updated_at) FROM outbox WHERE state = 'delivered'", nil, &t)
	return t
}

func (q *benchQueries) states() string {
	var s string
	q.scan("SELECT coalesce(string_agg(state || ' ' || n, ', ' ORDER BY state), 'none') FROM (SELECT state, count(*) n FROM recordings GROUP BY state) c", nil, &s)
	return s
}

// latency is receipt → CRM delivery by lane and for all: from the
// recording's created_at, or from start when it was queued before the
// worker started, to its outbox row's delivery.
func (q *benchQueries) latency(start time.Time) []laneLatency {
	q.b.Helper()
	q.count++
	rows, err := q.pool.Query(context.Background(), `
		SELECT coalesce(r.lane, 'all'), count(*),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM o.updated_at - greatest(r.created_at, $1))),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM o.updated_at - greatest(r.created_at, $1)))
		FROM outbox o JOIN action_sets s ON s.id = o.action_set_id JOIN recordings r ON r.id = s.recording_id
		WHERE o.state = 'delivered'
		GROUP BY ROLLUP (r.lane) ORDER BY 1`, start)
	if err != nil {
		q.b.Fatal(err)
	}
	defer rows.Close()
	var out []laneLatency
	for rows.Next() {
		var l laneLatency
		var p50, p99 float64
		if err := rows.Scan(&l.lane, &l.n, &p50, &p99); err != nil {
			q.b.Fatal(err)
		}
		l.p50, l.p99 = time.Duration(p50*float64(time.Second)), time.Duration(p99*float64(time.Second))
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		q.b.Fatal(err)
	}
	return out
}

// resetStatements empties pg_stat_statements when the server preloads it
// and says whether it does; when not, the report says so.
func (r *benchRig) resetStatements(b *testing.B, q *benchQueries) bool {
	var libs string
	q.scan("SELECT current_setting('shared_preload_libraries')", nil, &libs)
	if !strings.Contains(libs, "pg_stat_statements") {
		r.statements = []string{fmt.Sprintf("pg_stat_statements is not loaded (shared_preload_libraries = %q): no top statements", libs)}
		return false
	}
	ctx := context.Background()
	if _, err := q.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		b.Fatal(err)
	}
	if _, err := q.pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		b.Fatal(err)
	}
	q.count += 2
	return true
}

// topStatements are the 10 statements of the run's database with the
// most total execution time.
func (q *benchQueries) topStatements() []string {
	q.count++
	rows, err := q.pool.Query(context.Background(), `
		SELECT calls, total_exec_time, mean_exec_time, regexp_replace(query, '\s+', ' ', 'g')
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 10`)
	if err != nil {
		q.b.Fatal(err)
	}
	defer rows.Close()
	out := []string{fmt.Sprintf("%10s %12s %9s  %s", "calls", "total ms", "mean ms", "statement")}
	for rows.Next() {
		var calls int64
		var total, mean float64
		var query string
		if err := rows.Scan(&calls, &total, &mean, &query); err != nil {
			q.b.Fatal(err)
		}
		if len(query) > 110 {
			query = query[:110] + "…"
		}
		out = append(out, fmt.Sprintf("%10d %12.0f %9.3f  %s", calls, total, mean, query))
	}
	if err := rows.Err(); err != nil {
		q.b.Fatal(err)
	}
	return out
}

// print writes the sitting's figures as one table.
func (r *benchRig) print() {
	w := os.Stdout
	fmt.Fprintf(w, "\nthroughput, one sitting (%d workers in all: immediate + batch + crm; River with the same MaxWorkers, FetchCooldown %s)\n",
		r.maxWorkers, river.FetchCooldownMin)
	fmt.Fprintf(w, "  %-44s %12.0f jobs/s\n", "River, bare no-op jobs (InsertMany, 10,000)", r.riverRate)
	if r.floorRate > 0 && r.riverRate > 0 {
		fmt.Fprintf(w, "  %-44s %12.0f sets/s  (%.3f× River: the most a pipeline committing per recording can reach)\n",
			fmt.Sprintf("server floor, %d bare single-row commits", floorCommits), r.floorRate, r.floorRate/r.riverRate)
	}
	fmt.Fprintf(w, "  (peer: a hand-rolled River pipeline, processes like ingest's and the worker's: 2 jobs per recording, a transaction per step, %d + %d workers, the same doubles and recordings)\n",
		r.peerTranscribe, r.peerDeliver)
	for _, n := range []int{benchSmall, benchMedium} {
		run, peer := r.runs[n], r.peers[n]
		if run != nil {
			ratio := 0.0
			if r.riverRate > 0 {
				ratio = run.rate / r.riverRate
			}
			fmt.Fprintf(w, "  %-44s %12.0f recordings/s  (%.3f× River)\n", fmt.Sprintf("pipeline, received → delivered, %s", thousands(n)), run.rate, ratio)
			fmt.Fprintf(w, "  %-44s %12.1f  (ingest %.1f + worker %.1f)\n", "  database commits per recording", run.ingestCommits+run.workerCommits, run.ingestCommits, run.workerCommits)
			fmt.Fprintf(w, "  %-44s %s\n", "  River jobs per recording", run.jobs)
			fmt.Fprintf(w, "  %-44s %12.2f  (%.2f ms of Redis's CPU)\n", "  Redis scripts per recording", run.redisScripts, run.redisCPU)
			fmt.Fprintf(w, "  %-44s %12.0f recordings/s\n", "  ingest --manifest", run.ingestRate)
			fmt.Fprintf(w, "  %-44s %12.2f  (ingest %.2f + worker %.2f)\n", "  CPU ms per recording, machine-wide", run.ingestCPU+run.workerCPU, run.ingestCPU, run.workerCPU)
			fmt.Fprintf(w, "  %-44s %12.2f\n", "    idle ms per recording, worker's run", run.workerIdle)
			fmt.Fprintf(w, "  %-44s %12.2f  (worker %.2f + PostgreSQL %.2f + doubles %.2f)\n", "    worker's run, own processes only", run.ownCPU, run.ownWorker, run.ownDB, run.ownDoubles)
			fmt.Fprintf(w, "  %-44s %12.1f MiB\n", "  worker peak RSS", float64(run.peakRSS)/(1<<20))
			for _, l := range run.latency {
				fmt.Fprintf(w, "  %-44s %9.2fs p50 %8.2fs p99  (%d)\n", "  receipt → CRM delivery, "+l.lane, l.p50.Seconds(), l.p99.Seconds(), l.n)
			}
		}
		if peer != nil {
			ratio := 0.0
			if r.riverRate > 0 {
				ratio = peer.rate / r.riverRate
			}
			fmt.Fprintf(w, "  %-44s %12.0f recordings/s  (%.3f× River)\n", fmt.Sprintf("peer, received → delivered, %s", thousands(n)), peer.rate, ratio)
			fmt.Fprintf(w, "  %-44s %12.1f  (ingest %.1f + worker %.1f)\n", "  database commits per recording", peer.ingestCommits+peer.workerCommits, peer.ingestCommits, peer.workerCommits)
			fmt.Fprintf(w, "  %-44s %s\n", "  River jobs per recording", peer.jobs)
			fmt.Fprintf(w, "  %-44s %12.0f recordings/s\n", fmt.Sprintf("  ingest, %s a transaction", thousands(peerIngestChunk)), peer.ingestRate)
			fmt.Fprintf(w, "  %-44s %12.2f  (ingest %.2f + worker %.2f)\n", "  CPU ms per recording, machine-wide", peer.ingestCPU+peer.workerCPU, peer.ingestCPU, peer.workerCPU)
			fmt.Fprintf(w, "  %-44s %12.2f\n", "    idle ms per recording, worker's run", peer.workerIdle)
			fmt.Fprintf(w, "  %-44s %12.2f  (worker %.2f + PostgreSQL %.2f + doubles %.2f)\n", "    worker's run, own processes only", peer.ownCPU, peer.ownWorker, peer.ownDB, peer.ownDoubles)
			fmt.Fprintf(w, "  %-44s %12.1f MiB\n", "  worker peak RSS", float64(peer.peakRSS)/(1<<20))
		}
		if run != nil && peer != nil && peer.rate > 0 && peer.ingestRate > 0 && peer.ingestCPU+peer.workerCPU > 0 && peer.ownCPU > 0 {
			fmt.Fprintf(w, "  %-44s %11.3f× throughput  %.3f× ingest  %.2f× CPU per recording (%.2f× own processes' in the worker's run)\n",
				fmt.Sprintf("callscribe / peer, %s", thousands(n)), run.rate/peer.rate, run.ingestRate/peer.ingestRate,
				(run.ingestCPU+run.workerCPU)/(peer.ingestCPU+peer.workerCPU), run.ownCPU/peer.ownCPU)
		}
	}
	if large := r.runs[benchLarge]; large != nil {
		fmt.Fprintf(w, "  %-44s %12.1f MiB after %s, %s delivered meanwhile\n", "worker peak RSS, 100,000 queued", float64(large.peakRSS)/(1<<20), benchHold, thousands(large.delivered))
		fmt.Fprintf(w, "  %-44s %12.0f recordings/s\n", fmt.Sprintf("  ingest --manifest, 100,000 (%d at once)", benchIngestParts), large.ingestRate)
		if small := r.runs[benchSmall]; small != nil && small.peakRSS > 0 {
			fmt.Fprintf(w, "  %-44s %12.2f×\n", "  RSS at 100,000 queued / at 1,000", float64(large.peakRSS)/float64(small.peakRSS))
		}
	} else {
		fmt.Fprintf(w, "  %-44s %12s\n", "worker peak RSS, 100,000 queued", "not run (BENCH_LARGE=1)")
	}
	if r.cpuProfile != "" {
		fmt.Fprintf(w, "worker CPU profile of the 10,000 run: %s (go tool pprof -top %s)\n", r.cpuProfile, r.cpuProfile)
	}
	if len(r.statements) > 0 {
		fmt.Fprintln(w, "top statements by total time, 10,000 run:")
		for _, s := range r.statements {
			fmt.Fprintln(w, "  "+s)
		}
	}
}

// runBounded runs cmd, killing it when it takes longer than d.
func runBounded(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		return fmt.Errorf("killed after %s (%w)", d, <-done)
	}
}

// vmHWM is the peak resident set size of process pid, in bytes.
func vmHWM(b testing.TB, pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("reading the worker's peak RSS: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("/proc/%d/status has no VmHWM", pid)
	return 0
}

func randHex(b testing.TB, n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(buf)
}

// tail is the last 4 KiB of s.
func tail(s string) string {
	if len(s) > 4096 {
		return "…" + s[len(s)-4096:]
	}
	return s
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
