package app

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
)

// The pool of a worker process follows its worker counts: one connection
// per worker of each queue plus the spare, never below the default.
func TestPoolSizeFollowsWorkers(t *testing.T) {
	t.Parallel()
	// One connection per worker of each queue (the crm queue's 10, the
	// replay queue's 4 by default) and 10 spare, at least 40.
	for _, c := range []struct {
		immediate, batch, replay int
		want                     int32
	}{{0, 0, 0, 44}, {5, 5, 0, 40}, {10, 60, 0, 94}, {100, 100, 0, 224}, {10, 60, 16, 106}} {
		a := &App{Config: config.Config{Pipeline: config.PipelineConfig{Config: jobs.Config{ImmediateWorkers: c.immediate, BatchWorkers: c.batch}},
			Replay: config.ReplayConfig{Workers: c.replay}}}
		if got := a.PoolSize(); got != c.want {
			t.Errorf("immediate %d, batch %d, replay %d: pool %d, want %d", c.immediate, c.batch, c.replay, got, c.want)
		}
	}
}

// Every session of the binary's pools names itself and is bounded idle in
// a transaction by the server; a database URL's own values win.
func TestPoolSessionSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.URLOf(t, testdb.New(t))
	check := func(pool *pgxpool.Pool, app, idle string) {
		t.Helper()
		defer pool.Close()
		var gotApp, gotIdle string
		if err := pool.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&gotApp); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&gotIdle); err != nil {
			t.Fatal(err)
		}
		if gotApp != app || gotIdle != idle {
			t.Errorf("application_name %q, idle_in_transaction_session_timeout %q; want %q and %q", gotApp, gotIdle, app, idle)
		}
	}
	for name, open := range map[string]func() (*pgxpool.Pool, error){
		"Connect":        func() (*pgxpool.Pool, error) { return Connect(ctx, dbURL, slog.New(slog.DiscardHandler)) },
		"ConnectWorkers": func() (*pgxpool.Pool, error) { return ConnectWorkers(ctx, dbURL, slog.New(slog.DiscardHandler), 4) },
		"ConnectOwner":   func() (*pgxpool.Pool, error) { return ConnectOwner(ctx, dbURL) },
	} {
		pool, err := open()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		check(pool, ApplicationName, "1min")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", "callscribe-ops")
	q.Set("idle_in_transaction_session_timeout", "5s")
	u.RawQuery = q.Encode()
	pool, err := ConnectOwner(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	check(pool, "callscribe-ops", "5s")
}

// The server ends a session of the binary's pool left idle in a
// transaction, rolling it back and releasing its locks.
func TestPoolIdleTransactionEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(testdb.URLOf(t, testdb.New(t)))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("idle_in_transaction_session_timeout", "200ms") // the pool's own setting, shorter
	u.RawQuery = q.Encode()
	pool, err := ConnectOwner(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "CREATE TABLE idle_probe (x int)"); err != nil {
		t.Fatal(err)
	}
	const lock = 0x69646c65
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lock); err != nil {
		t.Fatal(err)
	}
	// The transaction now sits idle. Another session waits for its lock,
	// which only the end of the transaction gives back.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	other, err := pool.Acquire(waitCtx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := other.Exec(waitCtx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		t.Fatalf("the lock of the idle transaction was never released: %v", err)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", lock); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the transaction the server ended still answers")
	}
	var exists bool
	if err := other.QueryRow(ctx, "SELECT to_regclass('idle_probe') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("the ended transaction's table exists: %v (%v)", exists, err)
	}
}
