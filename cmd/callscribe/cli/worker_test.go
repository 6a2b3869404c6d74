package cli_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// ingest, worker, jobs show, scopes list and jobs retry work together
// against a real database and the simulator; the worker stops cleanly on
// Ctrl-C.
func TestWorkerCommandDrivesIngestedRecordings(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, "recordings") // the worker's transitions
	sim, err := sttsim.New(sttsim.Config{RateLimitShare: 0.3, Cooldown: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\nretry_after: {base_backoff: 50ms, max_backoff: 500ms}\n" +
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + srv.URL + "', api_key: sim-key}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	ctx := context.Background()
	for _, c := range []string{"call-1001", "call-1002", "call-1003", "call-1004"} {
		if code, _, stderr := run(t, ctx, env, "--config", config, "ingest", "--tenant", "northline", "--call", c,
			"--audio", "northline/"+c+".wav", "--lane", "immediate"); code != 0 {
			t.Fatalf("ingest %s: %s", c, stderr)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(wctx, []string{"--config", config, "worker", "--metrics-addr", "127.0.0.1:0"}, cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()
	committed := func() bool {
		_, listed, _ := run(t, ctx, env, "--config", config, "jobs", "list", "--state", "committed")
		return strings.Count(listed, "northline") == 4 // no CRM configured: committed, nothing delivered
	}
	if !testwait.Until(60*time.Second, changes, committed) {
		_, all, _ := run(t, ctx, env, "--config", config, "jobs", "list")
		t.Fatalf("not all committed after 60s:\n%s\n%s", all, errOut.String())
	}
	// The worker's own counters, for Prometheus to sum across workers.
	m := regexp.MustCompile(`metrics on (http://127\.0\.0\.1:\d+/metrics)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the worker printed no metrics address:\n%s", out.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	scraped, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(scraped), "callscribe_submissions_per_transcript_count 4") {
		t.Fatalf("the worker's metrics lack its 4 commits:\n%.3000s", scraped)
	}
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d after Ctrl-C: %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s of Ctrl-C")
	}
	code, shown, _ := run(t, ctx, env, "--config", config, "jobs", "show", "--tenant", "northline", "--call", "call-1001")
	if code != 0 || !strings.Contains(shown, "committed") || !strings.Contains(shown, "transcript received") {
		t.Fatalf("jobs show:\n%s", shown)
	}
	if code, _, stderr := run(t, ctx, env, "--config", config, "scopes", "list"); code != 0 {
		t.Fatalf("scopes list: %s", stderr)
	}
	code, _, stderr := run(t, ctx, env, "--config", config, "jobs", "retry", "00000000-0000-0000-0000-000000000000")
	if code == 0 || !strings.Contains(stderr, "not found") {
		t.Fatalf("retry of an unknown recording: %d %q", code, stderr)
	}
	code, _, stderr = run(t, ctx, env, "--config", config, "scopes", "resume", "nope")
	if code == 0 || !strings.Contains(stderr, "not paused") {
		t.Fatalf("resume of a scope that is not paused: %d %q", code, stderr)
	}
}

// genericHTTPSlots is held by each test of this package that runs a
// worker counting generic-http/stt slots in the shared Redis under the
// default key prefix (TestWorkerSharesVendorSlotsThroughRedis,
// TestStatusPageInBrowser): those counters are one for the whole server,
// so such tests run one at a time, or one would read the other's slots.
var genericHTTPSlots sync.Mutex

// The worker takes its vendor slots from the shared Redis counters: with a
// limit of 2 and 1 kept for live calls, never more than one submission is
// in flight, and every slot is given back.
func TestWorkerSharesVendorSlotsThroughRedis(t *testing.T) {
	t.Parallel()
	genericHTTPSlots.Lock()
	t.Cleanup(genericHTTPSlots.Unlock)
	ctx := context.Background()
	pool := testdb.New(t)
	redisURL := testredis.URL()
	sim, _ := sttsim.New(sttsim.Config{Latency: 30 * time.Millisecond})
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	rdb := testredis.Client(t)
	// No other test counts generic-http slots in the shared Redis while
	// this one runs (genericHTTPSlots): start and end clean.
	clean := func() { testredis.DeleteMatching(rdb, "callscribe:cap:{generic-http/*") }
	clean()
	t.Cleanup(clean)

	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\n" +
		"capacity:\n  limits:\n    generic-http/stt: {limit: 2, batch_reserve: 1}\n" +
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: redisURL}
	for _, c := range []string{"call-1001", "call-1002", "call-1003", "call-1004"} {
		if code, _, stderr := run(t, ctx, env, "--config", config, "ingest", "--tenant", "northline", "--call", c, "--audio", "northline/"+c+".wav"); code != 0 {
			t.Fatalf("ingest: %s", stderr)
		}
	}
	changes := testwait.Changes(t, pool, "recordings") // the worker's transitions
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var werr syncBuffer
	go func() {
		done <- cli.Run(wctx, []string{"--config", config, "worker"}, cli.Env{Stdout: &syncBuffer{}, Stderr: &werr, Getenv: envOf(env)})
	}()
	committed := func() bool {
		_, listed, _ := run(t, ctx, env, "--config", config, "jobs", "list", "--state", "committed")
		return strings.Count(listed, "northline") == 4
	}
	if !testwait.Until(60*time.Second, changes, committed) {
		t.Fatalf("not all committed after 60s\n%s", werr.String())
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("worker exit %d: %s", code, werr.String())
	}
	_, status, _ := run(t, ctx, env, "--config", config, "capacity", "status")
	var line string
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "generic-http ") {
			line = strings.Join(strings.Fields(l), " ")
		}
	}
	// In use 0 (every slot given back), limit 2, peak 1: batch work never
	// took the slot kept for live calls.
	if !strings.HasPrefix(line, "generic-http stt 0 2 2 1 at ") {
		t.Fatalf("capacity status after the run: %q\n%s", line, status)
	}
}

// worker --cpuprofile writes a pprof profile that ends when the worker
// stops; a file it cannot create is an error naming the flag.
func TestWorkerCPUProfile(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	dir := t.TempDir()
	code, _, stderr := run(t, context.Background(), env, "worker", "--cpuprofile", filepath.Join(dir, "missing", "cpu.pprof"))
	if code == 0 || !strings.Contains(stderr, "--cpuprofile") {
		t.Fatalf("an uncreatable profile: code %d, stderr %q", code, stderr)
	}
	profile := filepath.Join(dir, "cpu.pprof")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--cpuprofile", profile}, cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(errOut.String(), "worker started") {
		select {
		case code := <-done:
			t.Fatalf("worker exited %d before starting: %s", code, errOut.String())
		case <-deadline:
			t.Fatalf("worker not started after 60s: %s", errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d: %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s of Ctrl-C")
	}
	b, err := os.ReadFile(profile)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a gzipped protobuf
		t.Fatalf("profile %s: %d bytes, %v", profile, len(b), err)
	}
}
