package jobstest

import (
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// LedgerTables are the tables whose writes Env.Changes signals.
var LedgerTables = []string{"recordings", "scope_deferrals"}

// Env is a pipeline Setup built: its database, ledger, pipeline, River
// client (not started), speech simulator and audio root.
type Env struct {
	Pool     *pgxpool.Pool
	Ledger   *ledger.Ledger
	Pipeline *jobs.Pipeline
	Client   *river.Client[pgx.Tx]
	Sim      *sttsim.Server
	// Root is the audio root the recordings' files are under.
	Root string
	// Changes fires after each write to LedgerTables, by this process or
	// a worker process.
	Changes <-chan struct{}
}

// Setup builds a pipeline against a fresh database, an audio root with n
// recordings (t1/call-000.wav, ... of 2 to 2.4 seconds, each with its
// own text at the simulator) and a stt-http simulator with simCfg's
// trouble; it returns the recordings' paths too. cfg's zero Tenants is
// tenant t1 at the simulator, and its zero backoffs, poll interval and
// probe wait are short ones, and its zero RolloutDefault is enforce (the
// tests assert the guarantees enforced; a cohort observes only when a
// test says so); deps are the pipeline's, its Store the audio root's.
func Setup(t testing.TB, simCfg sttsim.Config, cfg jobs.Config, n int, deps jobs.Deps) (*Env, []string) {
	t.Helper()
	cfg.RolloutDefault = cmp.Or(cfg.RolloutDefault, ledger.RolloutEnforce)
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, LedgerTables...)
	root := t.TempDir()
	expected := map[string]string{}
	var files []string
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("t1/call-%03d.wav", i))
		WriteWAV(t, p, 2*time.Second+time.Duration(i%5)*100*time.Millisecond, i+3)
		expected[FileDigest(t, p)] = fmt.Sprintf("call number %d: the rate sheet goes out on Friday", i)
		files = append(files, p)
	}
	simCfg.ExpectedText = expected
	sim, err := sttsim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := audio.Open(context.Background(), audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if cfg.Tenants == nil {
		cfg.Tenants = map[string]jobs.TenantConfig{"t1": {Provider: "generic-http", BaseURL: srv.URL, APIKey: "sim-key", Account: "sim", Model: "general"}}
	}
	if cfg.RetryAfter.BaseBackoff == 0 {
		cfg.RetryAfter.BaseBackoff = 20 * time.Millisecond
		cfg.RetryAfter.MaxBackoff = 200 * time.Millisecond
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.ProbeWait == 0 {
		cfg.ProbeWait = 50 * time.Millisecond
	}
	deps.Store = store
	p, err := jobs.New(pool, l, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	client, err := NewClient(pool, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Pool: pool, Ledger: l, Pipeline: p, Client: client, Sim: sim, Root: root, Changes: changes}, files
}
