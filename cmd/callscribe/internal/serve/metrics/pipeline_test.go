package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// scrapeMetrics reads m's /metrics as Prometheus would.
func scrapeMetrics(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rr.Code != 200 {
		t.Fatalf("GET /metrics: %d", rr.Code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(rr.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series are the series of name whose labels include want (name, value
// pairs), over every scrape given: Prometheus's sum over processes.
func series(name string, want []string, scrapes ...map[string]*dto.MetricFamily) []*dto.Metric {
	var out []*dto.Metric
	for _, fams := range scrapes {
	next:
		for _, m := range fams[name].GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if have[want[i]] != want[i+1] {
					continue next
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// sumOf sums counters and gauges, or the histograms' counts and sums.
func sumOf(ms []*dto.Metric) (v float64, count uint64) {
	for _, m := range ms {
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += m.Histogram.GetSampleSum()
			count += m.Histogram.GetSampleCount()
		}
	}
	return v, count
}

// The rollout test of the issue: a 429 storm (a vendor taking 2 requests
// in flight, 30% random 429s) on 30 recordings, a worker process stopped
// mid-run with its jobs cancelled and another taking over, each process
// with its own metrics and a third (serve's) reading the database; then
// each of the six rollout metrics read back from /metrics, summed over the
// processes, against what the ledger and the simulator say.
func TestMetricsRollout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 30
	procA := metrics.New(metrics.Config{})
	var ob *outbox.Outbox
	commit := func(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rec ledger.Recording, actions []crm.Action,
		pending int) (ledger.Transition, bool, error) {
		return ob.CommitStep(ctx, tx, client, rec, actions, pending)
	}
	e, files := jobstest.Setup(t, sttsim.Config{MaxInFlight: 2, RateLimitShare: 0.3, Cooldown: 300 * time.Millisecond,
		InFlightRetryAfter: 200 * time.Millisecond, Latency: 20 * time.Millisecond, LatencyJitter: 20 * time.Millisecond,
		TroubleSeed: 7},
		jobs.Config{}, n, jobs.Deps{Commit: commit, Metrics: procA})
	ob, obErr := outbox.New(outbox.Config{}, e.Pool, e.Ledger) // no CRM: committed, nothing to deliver
	if obErr != nil {
		t.Fatal(obErr)
	}
	serve := metrics.New(metrics.Config{Pool: e.Pool})
	scope := e.Pipeline.Config().Tenants["t1"].Scope

	// Before anything: nothing eligible, no cooldown.
	fams := scrapeMetrics(t, serve)
	for _, lane := range []string{"immediate", "batch"} {
		if v, _ := sumOf(series("callscribe_oldest_eligible_age_seconds", []string{"lane", lane}, fams)); v != 0 {
			t.Errorf("oldest eligible %s before ingest = %v, want 0", lane, v)
		}
	}

	if err := e.Client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		lane := ledger.LaneBatch
		if i%3 == 0 {
			lane = ledger.LaneImmediate
		}
		if _, err := e.Pipeline.Ingest(ctx, e.Client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f, Lane: lane}); err != nil {
			t.Fatal(err)
		}
	}
	// Process A dies a third of the way through: its running jobs are
	// cancelled mid-step.
	if !testwait.Until(60*time.Second, e.Changes, func() bool {
		counts, err := e.Ledger.CountByState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return counts[ledger.StateCommitted] >= n/3
	}) {
		t.Fatal("a third of the recordings not committed within 60s")
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := e.Client.StopAndCancel(stopCtx); err != nil {
		t.Fatalf("stopping process A: %v", err)
	}
	cancel()
	// Everything process A did is in the ledger before split, everything
	// process B does after it.
	split := time.Now()
	// Process B takes over on the same database.
	procB := metrics.New(metrics.Config{})
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + e.Root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	pB, err := jobs.New(e.Pool, e.Ledger, e.Pipeline.Config(), jobs.Deps{Store: store, Commit: commit, Metrics: procB})
	if err != nil {
		t.Fatal(err)
	}
	clientB, err := jobstest.NewClient(e.Pool, pB, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = clientB.StopAndCancel(ctx)
	})
	var counts map[ledger.State]int
	if !testwait.Until(120*time.Second, e.Changes, func() bool {
		if counts, err = e.Ledger.CountByState(ctx); err != nil {
			t.Fatal(err)
		}
		return counts[ledger.StateCommitted] == n
	}) {
		t.Fatalf("states %v after 120s, want all %d committed", counts, n)
	}

	recs, err := e.Ledger.Recordings(ctx, ledger.RecordingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// What the ledger says each process did: commits (a committed
	// recording's last change is its commit) with their submissions,
	// throttles (one extension each) and deadline moves.
	var ledgerA, ledgerB struct{ commits, submissions, throttles, moves int }
	for _, r := range recs {
		l := &ledgerA
		if r.UpdatedAt.After(split) {
			l = &ledgerB
		}
		l.commits++
		l.submissions += r.Attempt
	}
	exts, err := e.Ledger.ScopeDeferralExtensions(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range exts {
		l := &ledgerA
		if x.At.After(split) {
			l = &ledgerB
		}
		l.throttles++
		if !x.ObserveOnly && x.ResultingNotBefore.Equal(x.OfferedNotBefore) {
			l.moves++
		}
	}
	deferrals, err := e.Ledger.ScopeDeferrals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	activeBefore := 0
	for _, d := range deferrals {
		if d.Active(time.Now()) && !d.Paused {
			activeBefore++
		}
	}
	a, b, s := scrapeMetrics(t, procA), scrapeMetrics(t, procB), scrapeMetrics(t, serve)
	activeAfter := 0
	for _, d := range deferrals {
		if d.Active(time.Now()) && !d.Paused {
			activeAfter++
		}
	}
	st := e.Sim.Stats()
	t.Logf("ledger: process A %+v, process B %+v; %d × 429 at the simulator", ledgerA, ledgerB, st.RateLimited)
	if ledgerA.commits == 0 || ledgerB.commits == 0 {
		t.Fatalf("the crash did not split the run: %d commits before it, %d after", ledgerA.commits, ledgerB.commits)
	}
	// inFlight bounds what process A may have done in the ledger and not
	// recorded: one event of a kind per job cancelled mid-step.
	inFlight := e.Pipeline.Config().ImmediateWorkers + e.Pipeline.Config().BatchWorkers
	// check compares what the processes recorded with the ledger: never
	// more in all (nothing counted twice), at most inFlight fewer (lost
	// with process A's cancelled steps, whose ledger writes may have
	// committed), and each process some.
	check := func(what string, gotA, gotB float64, wantA, wantB int) {
		t.Helper()
		got, want := int(gotA+gotB), wantA+wantB
		if got > want || got < want-inFlight || (wantA > 0 && gotA == 0) || (wantB > 0 && gotB == 0) {
			t.Errorf("%s: processes A and B recorded %v and %v, the ledger says %d before the crash and %d after (at most %d lost to it)",
				what, gotA, gotB, wantA, wantB, inFlight)
		}
	}

	// 1. 429s by provider and scope: each throttled answer the ledger
	// recorded (one extension each); the simulator's count exceeds it only
	// by answers cut off when process A's jobs were cancelled.
	throttled := []string{"provider", "generic-http", "scope", scope, "status", "429"}
	tA, _ := sumOf(series("callscribe_vendor_throttled_total", throttled, a))
	tB, _ := sumOf(series("callscribe_vendor_throttled_total", throttled, b))
	check("throttled 429s", tA, tB, ledgerA.throttles, ledgerB.throttles)
	if lost := st.RateLimited - int(tA+tB); tA+tB == 0 || lost < 0 || lost > inFlight {
		t.Errorf("throttled 429s = %v, the simulator answered %d", tA+tB, st.RateLimited)
	}
	// 2. Oldest eligible recording's age by lane: none waits.
	for _, lane := range []string{"immediate", "batch"} {
		if ms := series("callscribe_oldest_eligible_age_seconds", []string{"lane", lane}, s); len(ms) != 1 || ms[0].GetGauge().GetValue() != 0 {
			t.Errorf("oldest eligible %s = %v, want one series at 0", lane, ms)
		}
	}
	// 3. Submissions per committed transcript: each commit observed once,
	// by the process that made it; the sum is the ledger's submissions.
	subA, nA := sumOf(series("callscribe_submissions_per_transcript", nil, a))
	subB, nB := sumOf(series("callscribe_submissions_per_transcript", nil, b))
	check("commits", float64(nA), float64(nB), ledgerA.commits, ledgerB.commits)
	// A commit lost to the crash loses all its submissions with it.
	if sub, want := int(subA+subB), ledgerA.submissions+ledgerB.submissions; sub > want || (int(nA+nB) == n && sub != want) {
		t.Errorf("submissions of committed transcripts: processes A and B recorded %v and %v, the ledger says %d in all", subA, subB, want)
	}
	cA, _ := sumOf(series("callscribe_transcripts_committed_total", []string{"tenant", "t1"}, a))
	cB, _ := sumOf(series("callscribe_transcripts_committed_total", []string{"tenant", "t1"}, b))
	if cA != float64(nA) || cB != float64(nB) {
		t.Errorf("committed by tenant %v and %v, want %d and %d", cA, cB, nA, nB)
	}
	// 4. Cooldown length: one observation per deadline move; active
	// cooldowns as the ledger has them at the scrape.
	_, mA := sumOf(series("callscribe_scope_cooldown_seconds", []string{"kind", "stt"}, a))
	_, mB := sumOf(series("callscribe_scope_cooldown_seconds", []string{"kind", "stt"}, b))
	check("deadline moves", float64(mA), float64(mB), ledgerA.moves, ledgerB.moves)
	if ledgerA.moves+ledgerB.moves == 0 {
		t.Error("no deadline moved: no storm")
	}
	if v, _ := sumOf(series("callscribe_scope_cooldowns_active", nil, s)); int(v) > activeBefore || int(v) < activeAfter {
		t.Errorf("active cooldowns = %v, want between %d and %d", v, activeAfter, activeBefore)
	}
	// 5. Duplicate-key conflicts: the counters table's.
	dup, err := ob.Counter(ctx, outbox.CounterDuplicateKeyConflicts)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sumOf(series("callscribe_duplicate_key_conflicts_total", nil, s)); int64(v) != dup {
		t.Errorf("duplicate-key conflicts = %v, want %d", v, dup)
	}
	// 6. Receipt → commit: one observation per commit.
	_, rA := sumOf(series("callscribe_receipt_to_commit_seconds", nil, a))
	_, rB := sumOf(series("callscribe_receipt_to_commit_seconds", nil, b))
	if rA != nA || rB != nB {
		t.Errorf("receipt → commit observed %d and %d, want %d and %d", rA, rB, nA, nB)
	}
	// Cost: every transcript's audio billed once (2s to 2.4s each).
	if v, _ := sumOf(series("callscribe_billable_audio_seconds_total", []string{"provider", "generic-http", "tenant", "t1"}, a, b)); v < 2*float64(n-inFlight) || v > 2.5*n {
		t.Errorf("billable audio = %vs, want about %ds", v, 2*n)
	}
	// Nothing left in the pipeline's queues.
	for _, q := range []string{jobs.QueueImmediate, jobs.QueueBatch} {
		if v, _ := sumOf(series("callscribe_river_queue_depth", []string{"queue", q, "state", "available"}, s)); v != 0 {
			t.Errorf("queue %s: %v available, want 0", q, v)
		}
	}
}
