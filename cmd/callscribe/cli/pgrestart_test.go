package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/devservice"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// pgRestartRecordings is how many recordings the restart test ingests.
const pgRestartRecordings = 40

// A running worker survives PostgreSQL restarting under it, twice, in the
// middle of a throttled batch: it keeps running with no one touching it,
// every recording reaches committed exactly once (one commit event, a
// history that replays), the vendor transcribes each recording at most
// once, and the CRM applies every action set exactly once.
func TestWorkerSurvivesPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, err := devservice.StartPostgres(ctx, devservice.PostgresConfig{})
	if err != nil {
		t.Fatalf("starting a throwaway PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	env := map[string]string{config.EnvDatabaseURL: pg.URL()}
	if code, out, stderr := run(t, ctx, env, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up: %d\n%s\n%s", code, out, stderr)
	}

	// The vendor hears what the manifest says was spoken, so that the
	// action sets are the real ones (as in the demo).
	recordings, _ := filepath.Abs("../../../testdata/recordings")
	lines, err := os.ReadFile(filepath.Join(recordings, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	manifestLines := strings.Split(strings.TrimSpace(string(lines)), "\n")
	expected := map[string]string{}
	for _, l := range manifestLines {
		var m struct {
			Audio        string `json:"audio"`
			ExpectedText string `json:"expected_text"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		audio, err := os.ReadFile(filepath.Join(recordings, m.Audio))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(audio)
		expected[hex.EncodeToString(sum[:])] = m.ExpectedText
	}
	// A vendor that throttles, answers late and sometimes asynchronously,
	// and a CRM that takes its time: work is in flight when the database
	// goes away.
	sim, err := sttsim.New(sttsim.Config{ExpectedText: expected, RateLimitShare: 0.2, Cooldown: 300 * time.Millisecond, Latency: 40 * time.Millisecond,
		LatencyJitter: 80 * time.Millisecond, AsyncShare: 0.3, ProcessingTime: 400 * time.Millisecond, MaxInFlight: 3,
		InFlightRetryAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	crmSim, err := crmsim.New(crmsim.Config{Tokens: []string{"crm-key"}, Latency: 60 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	crmSrv := httptest.NewServer(crmSim.Handler())
	defer crmSrv.Close()

	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	body := "log: {level: warn}\naudio: {root: " + recordings + "}\nretry_after: {base_backoff: 50ms, max_backoff: 1s}\n" +
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n"
	for _, tenant := range []string{"northline", "harbor", "ridgeway"} {
		body += "    " + tenant + ": {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key, " +
			"crm: {kind: webhook, base_url: '" + crmSrv.URL + "', token: crm-key}}\n"
	}
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := pgRestartManifest(t, manifestLines)
	if code, out, stderr := run(t, ctx, env, "--config", cfgPath, "ingest", "--manifest", manifest); code != 0 ||
		!strings.Contains(out, fmt.Sprintf("%d ingested", pgRestartRecordings)) {
		t.Fatalf("ingest: %d\n%s\n%s", code, out, stderr)
	}

	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	var werr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(wctx, []string{"--config", cfgPath, "worker"}, cli.Env{Stdout: &syncBuffer{}, Stderr: &werr, Getenv: envOf(env)})
	}()
	failf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n--- jobs and deliveries ---\n%s--- worker log ---\n%s", append(args, pgRestartState(pool), werr.String())...)
	}

	// Progress as the database tells it; a query that fails while the
	// server is down counts as no news.
	var last pgRestartProgress
	progress := func() pgRestartProgress {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var p pgRestartProgress
		err := pool.QueryRow(qctx, `SELECT (SELECT count(*) FROM recordings WHERE state = 'committed'),
			(SELECT count(*) FROM outbox WHERE state = 'delivered')`).Scan(&p.committed, &p.delivered)
		if err == nil {
			last = p
		}
		return last
	}
	// waitFor polls cond for up to limit; the worker must keep running.
	waitFor := func(what string, limit time.Duration, cond func(pgRestartProgress) bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond(progress()) {
			select {
			case code := <-done:
				failf("the worker exited (%d) while waiting for %s", code, what)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				failf("no %s within %s (progress %+v; vendor %+v)", what, limit, last, sim.Stats().Accepted)
			}
		}
	}

	// Two restarts, each with work done before it and work left after it:
	// one at once, one with the server down for 3s.
	for i, down := range []time.Duration{0, 3 * time.Second} {
		const mark = 6
		before := progress()
		waitFor(fmt.Sprintf("%d more recordings committed before restart %d", mark, i+1), 90*time.Second,
			func(p pgRestartProgress) bool { return p.committed >= before.committed+mark })
		at := progress()
		if at.delivered >= pgRestartRecordings {
			failf("every action set was delivered before restart %d: nothing was left in flight; slow the simulators down", i+1)
		}
		if err := pg.Restart(ctx, down); err != nil {
			failf("restart %d: %v", i+1, err)
		}
		t.Logf("restarted PostgreSQL (%d, down %s) with %d committed and %d delivered of %d", i+1, down, at.committed, at.delivered, pgRestartRecordings)
	}

	waitFor("end of the batch (every recording committed and delivered)", 3*time.Minute, func(p pgRestartProgress) bool {
		return p.committed == pgRestartRecordings && p.delivered == pgRestartRecordings
	})
	select {
	case code := <-done:
		failf("the worker exited (%d) on its own", code)
	default:
	}
	stopWorker()
	select {
	case code := <-done:
		if code != 0 {
			failf("worker exited %d after Ctrl-C", code)
		}
	case <-time.After(60 * time.Second):
		failf("worker did not stop within 60s of Ctrl-C")
	}

	// Every recording committed once, with a history that replays.
	led, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := led.Recordings(ctx, ledger.RecordingFilter{Limit: pgRestartRecordings + 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != pgRestartRecordings {
		t.Fatalf("%d recordings in the ledger, want %d", len(recs), pgRestartRecordings)
	}
	for _, r := range recs {
		evs, err := led.Events(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		commits := 0
		for _, ev := range evs {
			if ev.New == ledger.StateCommitted {
				commits++
			}
		}
		if r.State != ledger.StateCommitted || commits != 1 {
			t.Errorf("%s/%s: state %s with %d commit events, want committed once", r.TenantID, r.CallID, r.State, commits)
		}
		if snap, err := ledger.Replay(evs); err != nil || snap != r.Snapshot() {
			t.Errorf("history of %s/%s does not replay: %v", r.TenantID, r.CallID, err)
		}
	}
	// One action set and one delivered outbox row per recording.
	var sets, rows, delivered int
	var perRecording []uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM action_sets), (SELECT count(*) FROM outbox),
		(SELECT count(*) FROM outbox WHERE state = 'delivered')`).Scan(&sets, &rows, &delivered); err != nil {
		t.Fatal(err)
	}
	dup, err := pool.Query(ctx, `SELECT recording_id FROM action_sets GROUP BY recording_id HAVING count(*) > 1`)
	if err == nil {
		perRecording, err = pgx.CollectRows(dup, pgx.RowTo[uuid.UUID])
	}
	if err != nil {
		t.Fatal(err)
	}
	if sets != pgRestartRecordings || rows != pgRestartRecordings || delivered != pgRestartRecordings || len(perRecording) > 0 {
		t.Errorf("%d action sets, %d outbox rows, %d delivered, recordings with more than one set %v; want %d, %d, %d, none",
			sets, rows, delivered, perRecording, pgRestartRecordings, pgRestartRecordings, pgRestartRecordings)
	}

	// The vendor transcribed each recording at most once.
	st := sim.Stats()
	for key, n := range st.Transcriptions {
		if n > 1 {
			t.Errorf("the vendor transcribed key %s %d times", key, n)
		}
	}
	if len(st.Transcriptions) < pgRestartRecordings {
		t.Errorf("the vendor transcribed %d keys for %d committed recordings", len(st.Transcriptions), pgRestartRecordings)
	}
	// The CRM applied each action set exactly once.
	cst := crmSim.Stats()
	if cst.Applied != pgRestartRecordings || cst.Conflicts != 0 {
		t.Errorf("the CRM holds %d action sets (%d conflicting bodies), want %d and none", cst.Applied, cst.Conflicts, pgRestartRecordings)
	}
	for key, n := range cst.ApplyCount {
		if n != 1 {
			t.Errorf("the CRM applied key %s %d times", key, n)
		}
	}
	t.Logf("vendor: %d submissions, %d × 429, %d replays; CRM: %d deliveries, %d replays answered 200",
		st.Submissions, st.RateLimited, st.Replays, cst.Deliveries, cst.Replays)
}

// pgRestartState describes the River jobs and the undelivered outbox rows,
// for a failure message.
func pgRestartState(pool *pgxpool.Pool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, q := range []string{
		`SELECT kind || ' ' || state::text || ' ' || count(*) FROM river_job GROUP BY kind, state ORDER BY 1`,
		`SELECT j.id || ' ' || j.kind || ' ' || j.state::text || ' attempt ' || j.attempt || ' scheduled ' || j.scheduled_at::text ||
			' errors ' || coalesce(j.errors::text, '') FROM river_job j WHERE j.state NOT IN ('completed') AND j.kind NOT LIKE '%sweep%' ORDER BY j.id LIMIT 20`,
		`SELECT o.id || ' ' || o.state || ' attempts ' || o.attempts || ' class ' || o.last_class || ' not_before ' || coalesce(o.not_before::text, '-')
			FROM outbox o WHERE o.state <> 'delivered' ORDER BY o.id`,
	} {
		rows, err := pool.Query(ctx, q)
		if err == nil {
			var lines []string
			if lines, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
				b.WriteString(strings.Join(lines, "\n") + "\n")
			}
		}
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

type pgRestartProgress struct{ committed, delivered int }

// pgRestartManifest writes a manifest of pgRestartRecordings lines, the
// testdata recordings again and again under new call ids, and returns its
// path.
func pgRestartManifest(t *testing.T, lines []string) string {
	t.Helper()
	var b strings.Builder
	for i := range pgRestartRecordings {
		line := lines[i%len(lines)]
		if copyN := i / len(lines); copyN > 0 {
			// "call_id":"call-1001" → "call_id":"call-1001-r1"
			start := strings.Index(line, `"call_id":"`) + len(`"call_id":"`)
			end := start + strings.IndexByte(line[start:], '"')
			line = line[:end] + fmt.Sprintf("-r%d", copyN) + line[end:]
		}
		b.WriteString(line + "\n")
	}
	p := filepath.Join(t.TempDir(), "m.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
