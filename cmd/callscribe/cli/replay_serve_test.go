package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
	"github.com/callscribe/callscribe/outbox"
)

// replayScript is how the staging CRM of TestServeShowsActiveReplayRuns
// answers its n-th request: the first 15 settle their delivery (6 applied,
// 5 already held, 4 refused), so the 16th is the first try of the last
// delivery, whose tries then get 3 server errors, a 429 of one second and
// a 429 of an hour, which keeps the run active with that one pending.
func replayScript(n int64) (status int, retryAfter, body string) {
	switch {
	case n <= 6:
		return http.StatusCreated, "", fmt.Sprintf(`{"id": "crm_%d", "applied_at": "2026-11-29T17:04:06Z"}`, n)
	case n <= 11:
		return http.StatusOK, "", fmt.Sprintf(`{"id": "crm_%d", "applied_at": "2026-11-29T17:04:06Z"}`, n)
	case n <= 15:
		return http.StatusUnprocessableEntity, "", `{"error": {"type": "invalid_request", "message": "refused by the test"}}`
	case n <= 18:
		return http.StatusInternalServerError, "", `{"error": {"type": "server_error", "message": "down"}}`
	case n == 19:
		return http.StatusTooManyRequests, "1", `{"error": {"type": "rate_limited", "message": "slow down"}}`
	}
	return http.StatusTooManyRequests, "3600", `{"error": {"type": "rate_limited", "message": "come back in an hour"}}`
}

// `callscribe serve` shows an active replay run's figures, read from
// PostgreSQL, on /metrics (callscribe_replay_*) and on the status page's
// "Replay runs" section: first a run enumerated and not worked yet, then
// the same run worked by another process (this test's River client)
// against a staging CRM that applies, holds, refuses, fails and throttles
// deliveries; once cancelled it is gone from both.
func TestServeShowsActiveReplayRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, "replay_runs", "replay_deliveries", "replay_tries")
	var requests atomic.Int64
	staging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		status, retryAfter, body := replayScript(requests.Add(1))
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	defer staging.Close()

	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "crm_targets:\n  staging: {kind: webhook, base_url: '" + staging.URL + "', token: stg}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: testredis.URL(), csconfig.EnvAPIToken: serveTestToken}
	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	var sout, serr syncBuffer
	done := make(chan int, 1)
	go func() {
		// --no-workers: serve only reports; the run is worked below.
		done <- cli.Run(sctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0", "--no-workers"},
			cli.Env{Stdout: &sout, Stderr: &serr, Getenv: envOf(env)})
	}()
	base := serveBase(t, &sout, &serr, done)
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+serveTestToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}

	// Another process with the staging target: it commits 16 recordings'
	// action sets, starts a run over them and enumerates it; its River
	// client works the run once started.
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: staging.URL, Token: "stg"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.New(outbox.Config{
		ReplayTargets: map[string]outbox.ReplayTarget{"staging": {Target: tgt, Scope: "crm:replay:staging"}},
		RetryAfter:    retryafter.Policy{BaseBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		ReplayWorkers: 1,
	}, pool, l)
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers, Queues: o.Queues(),
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const recordings = 16
	for i := range recordings {
		h := sha256.Sum256(fmt.Appendf(nil, "replay-audio-%d", i))
		res, err := l.Ingest(ctx, ledger.NewRecording{TenantID: "northline", CallID: fmt.Sprintf("call-%d", i), AudioSHA256: hex.EncodeToString(h[:])})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Recording
		for _, s := range []ledger.State{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated} {
			if r, err = l.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: s}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := o.Commit(ctx, client, r, []crm.Action{{Kind: crm.KindCallNote, Text: "Call: rate sheet promised"}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	id, err := o.ReplayStart(ctx, outbox.ReplayStartOptions{From: now.Add(-time.Hour), To: now.Add(time.Hour), Target: "staging",
		StartedBy: "ops@replay-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.ReplayEnumerate(ctx, client, id, nil); err != nil {
		t.Fatal(err)
	}
	line := func(name string, v int64) string {
		return fmt.Sprintf("callscribe_replay_%s{run=\"%d\",target=\"staging\"} %d\n", name, id, v)
	}
	check := func(page string, wants ...string) {
		t.Helper()
		for _, want := range wants {
			if !strings.Contains(page, want) {
				t.Errorf("no %q in:\n%s", want, page)
			}
		}
	}

	// Enumerated, not worked yet: the committed recordings were re-driven
	// by their chunk's transaction, their sets are deliveries waiting.
	check(get("/metrics"), "callscribe_replay_runs_active 1\n", line("recordings_enumerated", recordings), line("recordings_replayed", recordings),
		line("deliveries", recordings), line("deliveries_pending", recordings), line("crm_effects_created", 0), line("dead", 0),
		line("sent_inside_known_cooldown", 0), line("new_action_versions", 0))
	row := fmt.Sprintf(`<tr class="replay-run" data-run="%d" data-target="staging"><td class="n">%d</td><td>staging</td><td>running</td>`, id, id)
	check(get("/status/data"), row, `<td class="n replayed">16 / 16</td><td class="n settled">0 / 16</td>`, `<td>ops@replay-test</td>`)

	// Worked until the last delivery waits out the hour's 429.
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	var run outbox.ReplayRun
	if !testwait.Until(60*time.Second, changes, func() bool {
		run, err = o.ReplayRunByID(ctx, id)
		return err == nil && run.Report.Pending == 1 && run.Report.Throttled == 2
	}) {
		t.Fatalf("the run did not reach its throttled end: %+v (%v); %d requests\n%s", run, err, requests.Load(), serr.String())
	}
	rep := run.Report
	if !run.Active() || rep.RecordingsReplayed != recordings || rep.Deliveries != recordings || rep.CRMEffectsCreated != 6 ||
		rep.AnsweredAsReplays != 5 || rep.Dead != 4 || rep.Transient != 3 || rep.NewActionVersions != 0 || rep.Sends.IgnoredKnownCooldown != 0 {
		t.Fatalf("run %+v", run)
	}
	check(get("/metrics"), "callscribe_replay_runs_active 1\n",
		line("recordings_enumerated", recordings), line("recordings_replayed", recordings),
		line("deliveries", recordings), line("deliveries_pending", 1), line("crm_effects_created", 6), line("answered_as_replays", 5),
		line("throttled", 2), line("transient", 3), line("dead", 4), line("audit_events_appended", rep.AuditEventsAppended),
		line("new_action_versions", 0), line("sent_inside_known_cooldown", 0), line("in_flight_at_cooldown", int64(rep.Sends.InFlight)),
		"# TYPE callscribe_replay_deliveries gauge\n")
	check(get("/status/data"), row, `<td class="n replayed">16 / 16</td><td class="n settled">15 / 16</td>`,
		`<td class="n created">6</td><td class="n answered">5</td><td class="n throttled">2</td><td class="n transient">3</td>`,
		`<td class="n dead bad">4</td><td class="n inside-cooldown">0</td>`)

	// Cancelled: no longer active, gone from both.
	if _, err := o.ReplayCancel(ctx, id, "the test is over"); err != nil {
		t.Fatal(err)
	}
	metrics := get("/metrics")
	check(metrics, "callscribe_replay_runs_active 0\n")
	if regexp.MustCompile(`(?m)^callscribe_replay_[a-z_]+\{`).MatchString(metrics) {
		t.Errorf("a cancelled run's figures are still served:\n%s", metrics)
	}
	page := get("/status/data")
	check(page, `<p class="muted">No replay run is active.</p>`)
	if strings.Contains(page, `class="replay-run"`) {
		t.Errorf("a cancelled run is still listed:\n%s", page)
	}

	stopServe()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, serr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}
