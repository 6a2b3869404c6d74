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
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// worker + outbox list + jobs revalidate + replay, in-process against a
// real database, the speech simulator and two CRM doubles (the tenant's and
// a staging one).
func TestOutboxRevalidateAndReplayCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, "outbox") // the worker's deliveries
	sim, _ := sttsim.New(sttsim.Config{})
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	prod, _ := crmsim.New(crmsim.Config{})
	prodSrv := httptest.NewServer(prod.Handler())
	defer prodSrv.Close()
	staging, _ := crmsim.New(crmsim.Config{Tokens: []string{"stg"}})
	stgSrv := httptest.NewServer(staging.Handler())
	defer stgSrv.Close()

	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\n" +
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key, time_zone: America/Chicago,\n" +
		"                crm: {kind: webhook, base_url: '" + prodSrv.URL + "', token: crm-token}}\n" +
		"crm_targets:\n" +
		"  staging: {kind: webhook, base_url: '" + stgSrv.URL + "', token: stg}\n" +
		"  live: {kind: webhook, base_url: '" + prodSrv.URL + "', token: crm-token, production: true}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	c := func(args ...string) (int, string, string) {
		return run(t, ctx, env, append([]string{"--config", config}, args...)...)
	}
	for _, call := range []string{"call-1001", "call-1003"} {
		if code, _, stderr := c("ingest", "--tenant", "northline", "--call", call, "--audio", "northline/"+call+".wav"); code != 0 {
			t.Fatalf("ingest: %s", stderr)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	var werr syncBuffer
	go func() {
		done <- cli.Run(wctx, []string{"--config", config, "worker"}, cli.Env{Stdout: &syncBuffer{}, Stderr: &werr, Getenv: envOf(env)})
	}()
	delivered := func(n int) func() bool {
		return func() bool {
			_, out, _ := c("outbox", "list", "--state", "delivered", "--json")
			var l struct {
				Rows []map[string]any `json:"rows"`
			}
			_ = json.Unmarshal([]byte(out), &l)
			return len(l.Rows) == n
		}
	}
	if !testwait.Until(60*time.Second, changes, delivered(2)) {
		t.Fatalf("two deliveries: not after 60s\n%s", werr.String())
	}
	if prod.Stats().Applied != 2 {
		t.Fatalf("the tenant's CRM holds %d sets", prod.Stats().Applied)
	}
	// Every row has its deadline, the default day after its commit; with
	// nothing pending the oldest pending age is 0.
	_, listed, _ := c("outbox", "list", "--json")
	var l struct {
		Pending                 *int64 `json:"pending"`
		OldestPendingAgeSeconds *int64 `json:"oldest_pending_age_seconds"`
		Rows                    []struct {
			CreatedAt time.Time `json:"created_at"`
			Deadline  time.Time `json:"deadline"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(listed), &l); err != nil || l.Pending == nil || *l.Pending != 0 ||
		l.OldestPendingAgeSeconds == nil || *l.OldestPendingAgeSeconds != 0 || len(l.Rows) != 2 {
		t.Fatalf("outbox list --json: %v\n%s", err, listed)
	}
	for _, r := range l.Rows {
		if r.Deadline.Sub(r.CreatedAt) != 24*time.Hour {
			t.Fatalf("row committed %s has deadline %s, want a day later", r.CreatedAt, r.Deadline)
		}
	}
	_, text, _ := c("outbox", "list")
	for _, want := range []string{"DEADLINE", "pending 0\n", "oldest_pending_age_seconds 0\n", l.Rows[0].Deadline.Format(time.RFC3339)} {
		if !strings.Contains(text, want) {
			t.Fatalf("outbox list lacks %q:\n%s", want, text)
		}
	}

	// Revalidate one: a second action version is committed and delivered.
	_, listed, _ = c("jobs", "list", "--json")
	var recs []map[string]any
	if err := json.Unmarshal([]byte(listed), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("jobs list: %v %s", err, listed)
	}
	id, _ := recs[0]["id"].(string)
	if code, _, stderr := c("jobs", "revalidate", id); code != 0 {
		t.Fatalf("revalidate: %s", stderr)
	}
	if !testwait.Until(60*time.Second, changes, delivered(3)) {
		t.Fatalf("the second version delivered: not after 60s\n%s", werr.String())
	}
	stop()
	<-done

	from := time.Now().UTC().Add(-24 * time.Hour).Format("2006-01-02")
	to := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")
	code, _, stderr := c("replay", "--from", from, "--to", to, "--target", "live")
	if code == 0 || !strings.Contains(stderr, "production") {
		t.Fatalf("replay into a production target: %d %q", code, stderr)
	}
	code, out, stderr := c("replay", "--from", from, "--to", to, "--target", "staging", "--wait")
	if code != 0 || !strings.Contains(out, "CRM effects created:          3") || !strings.Contains(out, "new action versions created:  0") {
		t.Fatalf("first replay to staging: %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = c("replay", "--from", from, "--to", to, "--target", "staging", "--wait")
	if code != 0 || !strings.Contains(out, "CRM effects created:          0 (3 answered as replays") ||
		!strings.Contains(out, "recordings replayed:          2 of 2 enumerated") || !strings.Contains(out, "state done") {
		t.Fatalf("second replay to staging: %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = c("replay", "--from", from, "--to", to, "--target", "live", "--allow-production", "--wait")
	if code != 0 || !strings.Contains(out, "CRM effects created:          0") {
		t.Fatalf("replay into the tenant's own CRM: %d\n%s", code, out)
	}
	// The runs are listed, each with its figures.
	code, out, _ = c("replay", "status", "--json")
	var runs []struct {
		ID     int64  `json:"id"`
		State  string `json:"state"`
		Report struct {
			CRMEffectsCreated int64 `json:"crm_effects_created"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil || len(runs) != 3 || runs[2].Report.CRMEffectsCreated != 3 || runs[0].State != "done" {
		t.Fatalf("replay status --json: %d %v\n%s", code, err, out)
	}
	if code, _, stderr := c("replay", "--from", from, "--to", to, "--target", "nope"); code == 0 || !strings.Contains(stderr, "staging") {
		t.Fatalf("unknown target: %q", stderr)
	}
}

// replay's flags are checked before anything is opened, naming the flag.
func TestReplayFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeFile(t, dir, "c.yaml", "crm_targets:\n  staging: {kind: webhook, base_url: 'http://127.0.0.1:3', token: s}\n", 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01"}, "give --from, --to and --target"},
		{[]string{"replay", "--from", "yesterday", "--to", "2026-02-01", "--target", "staging"}, "--from"},
		{[]string{"replay", "--from", "2026-02-01", "--to", "2026-01-01", "--target", "staging"}, "is not after"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "nope"}, "configured: staging"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "staging", "--max-rate", "-3"}, "--max-rate"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "staging", "--state", "done"}, "--state"},
		{[]string{"replay", "status", "x"}, `run "x"`},
		{[]string{"replay", "cancel", "0"}, `run "0"`},
	} {
		code, _, stderr := run(t, context.Background(), nil, append([]string{"--config", cfgPath}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("callscribe %v = %d, %q; want an error naming %q", c.args, code, stderr, c.want)
		}
	}
}

// commitSets commits n recordings of tenant, each with one action set,
// straight through the ledger and the outbox (ingested, walked to
// validated, committed), without the speech pipeline: what a replay run
// replays. The outbox has no destination, so nothing is delivered. It
// returns the sets' idempotency keys (tenant:call:version).
func commitSets(t *testing.T, pool *pgxpool.Pool, tenant string, n int) []string {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.New(outbox.Config{}, pool, l)
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(i int) (string, error) {
		call := fmt.Sprintf("call-%04d", i)
		h := sha256.Sum256(fmt.Appendf(nil, "%s/%s", tenant, call))
		res, err := l.Ingest(ctx, ledger.NewRecording{TenantID: tenant, CallID: call, AudioSHA256: hex.EncodeToString(h[:])})
		if err != nil {
			return "", err
		}
		r := res.Recording
		for _, s := range []ledger.State{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated} {
			if r, err = l.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: s}); err != nil {
				return "", err
			}
		}
		c, err := o.Commit(ctx, client, r, []crm.Action{
			{Kind: crm.KindCallNote, Text: "Call " + call + ": rate sheet promised"},
			{Kind: crm.KindNextCall, Date: "2026-12-02"},
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s:%s:%d", tenant, call, c.Set.ActionVersion), nil
	}
	keys := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	const parallel = 8
	for w := range parallel {
		wg.Go(func() {
			for i := w; i < n; i += parallel {
				keys[i], errs[i] = commit(i)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("committing recording %d of %d: %v", i, n, err)
		}
	}
	return keys
}

// replayWindow is a --from, --to window holding every recording ingested
// now.
func replayWindow() (from, to string) {
	now := time.Now().UTC()
	return now.Add(-24 * time.Hour).Format(time.DateOnly), now.Add(48 * time.Hour).Format(time.DateOnly)
}
