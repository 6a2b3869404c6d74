// Package testwait lets a test wait for work done elsewhere (a River
// worker, another goroutine, another process) without sleeping: the test
// names a signal, a channel that fires whenever what it waits for may have
// happened, and a condition; Until checks the condition, then again each time
// the signal fires, until it holds or a generous deadline passes.
//
// Signals a test can use:
//
//   - Changes: every committed write to the named tables of a test
//     database, by any process (PostgreSQL LISTEN/NOTIFY through a trigger
//     that only tests install);
//   - a River client's Subscribe channel: a job completed, snoozed, failed;
//   - a channel a test double sends on when it saw something.
//
// It is a leaf: it imports no package of this module, and nothing outside
// tests imports it.
package testwait

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Until reports whether ok held within the given time. It checks ok at
// once, then each time signal delivers a value; it never sleeps. A closed
// signal means nothing more will happen: ok is checked one last time.
//
// ok runs on the caller's goroutine, so it may call t.Fatal.
func Until[T any](within time.Duration, signal <-chan T, ok func() bool) bool {
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		if ok() {
			return true
		}
		select {
		case _, open := <-signal:
			if !open {
				return ok()
			}
		case <-timeout.C:
			return ok()
		}
	}
}

// Channel is the PostgreSQL notification channel the Changes trigger
// notifies; the payload is the table's name.
const Channel = "testwait_changes"

// Changes returns a signal that fires after each committed INSERT, UPDATE or
// DELETE on one of tables in the database behind pool, whoever made it: this
// process or another one given the database's URL. Values coalesce: one
// pending value stands for any number of changes, so a waiter re-checks its
// condition rather than counting.
//
// It installs a statement-level trigger on each table that NOTIFYs Channel
// (in the test's own database: no production schema has it) and LISTENs on
// a connection of its own, closed when the test ends. Install it before the
// work starts, so the trigger's DDL does not wait on running transactions.
func Changes(t testing.TB, pool *pgxpool.Pool, tables ...string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	install := fmt.Sprintf(`CREATE OR REPLACE FUNCTION testwait_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(%s, TG_TABLE_NAME);
	RETURN NULL;
END $$`, quote(Channel))
	if _, err := pool.Exec(ctx, install); err != nil {
		t.Fatalf("testwait: installing the notify function: %v", err)
	}
	for _, table := range tables {
		id := pgx.Identifier{table}.Sanitize()
		if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE OR REPLACE TRIGGER testwait_notify AFTER INSERT OR UPDATE OR DELETE ON %s
FOR EACH STATEMENT EXECUTE FUNCTION testwait_notify()`, id)); err != nil {
			t.Fatalf("testwait: installing the notify trigger on %s: %v", table, err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatalf("testwait: connecting to listen: %v", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		t.Fatalf("testwait: listening on %s: %v", Channel, err)
	}
	signal := make(chan struct{}, 1)
	listen, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if _, err := conn.WaitForNotification(listen); err != nil {
				return // stopped, or the database is gone
			}
			select {
			case signal <- struct{}{}:
			default: // a value is pending already
			}
		}
	})
	t.Cleanup(func() {
		stop()
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return signal
}

func quote(s string) string { return "'" + s + "'" }
