package cli_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// The worker takes its vendor slots from the shared Redis counters: with a
// limit of 2 and 1 kept for live calls, never more than one submission is
// in flight, and every slot is given back.
func TestWorkerSharesVendorSlotsThroughRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	redisURL := testredis.URL()
	sim, _ := sttsim.New(sttsim.Config{Latency: 30 * time.Millisecond})
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	rdb := testredis.Client(t)
	// This is the only test that counts generic-http slots in the shared
	// Redis: start and end clean.
	clean := func() { testredis.DeleteMatching(rdb, "callscribe:cap:{generic-http/*") }
	clean()
	t.Cleanup(clean)

	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\n" +
		"capacity:\n  limits:\n    generic-http/stt: {limit: 2, batch_reserve: 1}\n" +
		"pipeline:\n  poll_interval: 50ms\n  tenants:\n" +
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
