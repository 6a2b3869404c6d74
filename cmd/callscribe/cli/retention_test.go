package cli_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// Committed recordings with delivered and dead deliveries, past their
// tenant's retention, are purged whole (events, transcript, action sets,
// outbox rows and events, scope extensions, audio object) by `retention
// run`, which the worker runs as the runtime role; a tenant whose
// retention has not passed keeps everything. --dry-run says what would go
// and removes nothing.
func TestRetentionRunPurgesCommittedHistoriesWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	// The tenants' 1ms retention is below the database's retention floor
	// (1 day by default): the owner lowers it, as an operator would.
	if _, err := pool.Exec(ctx, "UPDATE retention_floor SET min_retention = interval '0', updated_at = now()"); err != nil {
		t.Fatal(err)
	}
	changes := testwait.Changes(t, pool, "outbox")
	sim, _ := sttsim.New(sttsim.Config{RateLimitShare: 0.2, Cooldown: 100 * time.Millisecond})
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	good, _ := crmsim.New(crmsim.Config{})
	goodSrv := httptest.NewServer(good.Handler())
	defer goodSrv.Close()

	// The purge removes audio: work on a copy of the recordings.
	root := t.TempDir()
	calls := map[string][]string{"northline": {"call-1001", "call-1002"}, "ridgeway": {"call-3001"}, "harbor": {"call-2001"}}
	for tenant, cs := range calls {
		for _, c := range cs {
			b, err := os.ReadFile(filepath.Join("../../../testdata/recordings", tenant, c+".wav"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(root, tenant), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, tenant, c+".wav"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	tenant := func(name, extra string) string {
		return "    " + name + ": {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key, " + extra + "}\n"
	}
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + root + "}\nretry_after: {base_backoff: 50ms, max_backoff: 500ms}\n" +
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  probe_wait: 50ms\n  retention_every: -1s\n  tenants:\n" +
		tenant("northline", "retention: 1ms, crm: {kind: webhook, base_url: '"+goodSrv.URL+"', token: crm-token}") +
		// a token the CRM refuses: the delivery goes dead
		tenant("ridgeway", "retention: 1ms, crm: {kind: webhook, base_url: '"+goodSrv.URL+"', token: wrong-token}") +
		tenant("harbor", "retention: 720h, crm: {kind: webhook, base_url: '"+goodSrv.URL+"', token: crm-token}")
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	c := func(args ...string) (int, string, string) {
		return run(t, ctx, env, append([]string{"--config", config}, args...)...)
	}
	for tn, cs := range calls {
		for _, call := range cs {
			if code, _, stderr := c("ingest", "--tenant", tn, "--call", call, "--audio", tn+"/"+call+".wav"); code != 0 {
				t.Fatalf("ingest %s/%s: %s", tn, call, stderr)
			}
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	var werr syncBuffer
	go func() {
		done <- cli.Run(wctx, []string{"--config", config, "worker"}, cli.Env{Stdout: &syncBuffer{}, Stderr: &werr, Getenv: envOf(env)})
	}()
	settled := func() bool {
		_, out, _ := c("outbox", "list", "--json")
		var l struct {
			Rows []struct {
				State string `json:"state"`
			} `json:"rows"`
		}
		_ = json.Unmarshal([]byte(out), &l)
		n := 0
		for _, r := range l.Rows {
			if r.State == "delivered" || r.State == "dead" {
				n++
			}
		}
		return n == 4
	}
	if !testwait.Until(90*time.Second, changes, settled) {
		_, out, _ := c("outbox", "list")
		t.Fatalf("deliveries not settled after 90s:\n%s\n%s", out, werr.String())
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("worker exited %d: %s", code, werr.String())
	}
	if strings.Contains(werr.String(), "acting as the login user") {
		t.Fatalf("the worker did not act as the runtime role:\n%s", werr.String())
	}
	var dead int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE state = 'dead'").Scan(&dead); err != nil || dead != 1 {
		t.Fatalf("%d dead deliveries (%v), want ridgeway's 1", dead, err)
	}
	// Scope extensions caused by the throttled submissions.
	if _, err := pool.Exec(ctx, `INSERT INTO scope_deferrals (scope, not_before, updated_at) VALUES ('retention-test', now(), now())
		ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO scope_deferral_extensions (scope, offered_not_before, resulting_not_before, recording_id, at, seq)
		SELECT 'retention-test', now(), now(), id, now(), row_number() OVER (ORDER BY id) FROM recordings`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past the 1ms retention

	count := func(tenants ...string) map[string]int {
		t.Helper()
		out := map[string]int{}
		for _, q := range []struct{ name, sql string }{
			{"recordings", "SELECT count(*) FROM recordings WHERE tenant_id = ANY ($1)"},
			{"events", "SELECT count(*) FROM recording_events e JOIN recordings r ON r.id = e.recording_id WHERE r.tenant_id = ANY ($1)"},
			{"transcripts", "SELECT count(*) FROM transcripts x JOIN recordings r ON r.id = x.recording_id WHERE r.tenant_id = ANY ($1)"},
			{"action_sets", "SELECT count(*) FROM action_sets WHERE tenant_id = ANY ($1)"},
			{"outbox", "SELECT count(*) FROM outbox o JOIN action_sets a ON a.id = o.action_set_id WHERE a.tenant_id = ANY ($1)"},
			{"outbox_events", `SELECT count(*) FROM outbox_events e JOIN outbox o ON o.id = e.outbox_id
				JOIN action_sets a ON a.id = o.action_set_id WHERE a.tenant_id = ANY ($1)`},
			{"extensions", "SELECT count(*) FROM scope_deferral_extensions x JOIN recordings r ON r.id = x.recording_id WHERE r.tenant_id = ANY ($1)"},
		} {
			var n int
			if err := pool.QueryRow(ctx, q.sql, tenants).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			out[q.name] = n
		}
		return out
	}
	purged, kept := count("northline", "ridgeway"), count("harbor")
	for name, n := range purged {
		if n == 0 && name != "extensions" || kept[name] == 0 {
			t.Fatalf("before the purge, %s: %d past retention, %d kept; the test proves nothing", name, n, kept[name])
		}
	}

	code, out, stderr := c("retention", "run", "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("dry run: %s", stderr)
	}
	var pre struct {
		DryRun  bool `json:"dry_run"`
		Tenants []struct {
			TenantID     string `json:"tenant_id"`
			Recordings   int    `json:"recordings"`
			OutboxRows   int    `json:"outbox_rows"`
			AudioObjects int    `json:"audio_objects"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(out), &pre); err != nil || !pre.DryRun || len(pre.Tenants) != 2 ||
		pre.Tenants[0].TenantID != "northline" || pre.Tenants[0].Recordings != 2 || pre.Tenants[0].OutboxRows != 2 ||
		pre.Tenants[0].AudioObjects != 2 || pre.Tenants[1].TenantID != "ridgeway" || pre.Tenants[1].Recordings != 1 {
		t.Fatalf("dry run = %+v (%v) from\n%s", pre, err, out)
	}
	if after := count("northline", "ridgeway"); after["recordings"] != 3 {
		t.Fatalf("the dry run removed something: %v", after)
	}

	code, out, stderr = c("retention", "run")
	if code != 0 {
		t.Fatalf("retention run: %s", stderr)
	}
	if !strings.Contains(out, "purged 3 recordings") || !strings.Contains(out, "3 deleted") {
		t.Fatalf("retention run printed:\n%s", out)
	}
	for name, n := range count("northline", "ridgeway") {
		if n != 0 {
			t.Errorf("after the purge, %d %s of purged recordings remain", n, name)
		}
	}
	if after := count("harbor"); !maps.Equal(after, kept) {
		t.Errorf("harbor, within retention, changed: %v -> %v", kept, after)
	}
	for tn, cs := range calls {
		for _, call := range cs {
			_, err := os.Stat(filepath.Join(root, tn, call+".wav"))
			if gone := os.IsNotExist(err); gone != (tn != "harbor") {
				t.Errorf("audio %s/%s: gone = %v", tn, call, gone)
			}
		}
	}
	var batches, audioRows int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM retention_purges WHERE recordings_deleted > 0),
		(SELECT count(*) FROM retention_audio WHERE outcome = 'deleted')`).Scan(&batches, &audioRows); err != nil ||
		batches != 1 || audioRows != 3 {
		t.Fatalf("audit: %d batches, %d audio rows (%v); want 1 and 3", batches, audioRows, err)
	}
}
