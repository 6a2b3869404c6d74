package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/migrations"
)

// A session's temporary tables come first in an unpinned search_path: as
// the runtime role, a temporary recording_states that calls every state
// terminal, or a recording_state_edges with an illegal edge, must change
// nothing the guards or the purge decide. The functions pin their
// search_path (pg_temp last), and the grants take TEMP away from the
// runtime role.
func TestAttackTempTablesDoNotShadowTheGuards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	open := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	failed := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateFailed)
	rt := testdb.AsRuntime(t, b.pool)

	conn, err := rt.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// An illegal transition, with the edges shadowed.
	for _, stmt := range []string{
		"CREATE TEMP TABLE recording_state_edges (from_state text, to_state text)",
		"INSERT INTO recording_state_edges VALUES ('failed', 'committed')",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
			SELECT id, last_event_seq + 1, 'failed', 'committed', attempt, now() FROM recordings WHERE id = $1`, failed.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE recordings SET state = 'committed', last_event_seq = last_event_seq + 1, updated_at = now()
			WHERE id = $1`, failed.ID)
		return err
	})
	if sqlState(err) != "CS001" {
		t.Errorf("failed -> committed with a shadowing recording_state_edges: err = %v, want the guard's CS001", err)
	}
	if r, err := b.ledger.Recording(ctx, failed.ID); err != nil || r.State != ledger.StateFailed {
		t.Fatalf("the failed recording after the attempt: %v, %v; want still failed", r.State, err)
	}

	// The purge, with every state shadowed as terminal.
	for _, stmt := range []string{
		"CREATE TEMP TABLE recording_states AS SELECT name, true AS terminal FROM public.recording_states",
		"GRANT SELECT ON pg_temp.recording_states TO PUBLIC",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	_, err = conn.Exec(ctx, `SELECT * FROM ledger_retention_purge_batch(ARRAY[]::text[], ARRAY[]::timestamptz[], 'infinity',
		now(), 1000, 'routine', '{}')`)
	t.Logf("purge with a shadowing recording_states: %v", err)
	if _, err := b.ledger.Recording(ctx, open.ID); err != nil {
		t.Errorf("the submitted recording after a purge with a shadowing recording_states: %v, want it kept", err)
	}
	if evs, err := b.ledger.Events(ctx, open.ID); err != nil || len(evs) != 3 {
		t.Fatalf("the submitted recording's history: %d events, %v; want 3", len(evs), err)
	}

	// With the grants applied to this database (the per-test copy does
	// not inherit the template's database privileges), the runtime role
	// has no TEMP at all.
	if _, err := migrations.New(b.pool, nil).EnsureRoles(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := testdb.AsRuntime(t, b.pool)
	_, err = fresh.Exec(ctx, "CREATE TEMP TABLE recording_states (name text, terminal boolean)")
	if sqlState(err) != "42501" {
		t.Errorf("as the runtime role after the grants, CREATE TEMP TABLE: err = %v, want 42501", err)
	}
}

// The purge's cutoffs and its audit record are the caller's words: as the
// runtime role, an infinite cutoff must not remove a recording younger
// than the retention floor, and the audit row is stamped with the
// database's time, not the caller's.
func TestAttackPurgeCutoffsAreFloored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// A ledger on (nearly) today's clock: a recording five minutes old.
	c := clock.NewStepping(time.Now().Add(-5*time.Minute), time.Millisecond)
	l, err := ledger.New(b.pool, &ledger.Config{Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	recent := &bundle{pool: b.pool, ledger: l, clock: c}
	failed := recent.walk(t, recent.ingest(t), ledger.StateEligible, ledger.StateFailed)
	rt := testdb.AsRuntime(t, b.pool)
	_, err = rt.Exec(ctx, `SELECT * FROM ledger_retention_purge_batch(ARRAY['acme'], ARRAY['infinity']::timestamptz[], '-infinity',
		'2001-01-01', 1000, 'routine', '{}')`)
	t.Logf("purge with an infinite cutoff: %v", err)
	if _, err := l.Recording(ctx, failed.ID); err != nil {
		t.Fatalf("the five-minute-old failed recording after a purge with an infinite cutoff: %v, want it kept", err)
	}
	var old int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM retention_purges WHERE at < now() - interval '1 hour'").Scan(&old); err != nil || old != 0 {
		t.Fatalf("%d audit rows stamped with the caller's time (%v), want 0", old, err)
	}
	// The floor is the owner's: the runtime role cannot lower it.
	if _, err := rt.Exec(ctx, "UPDATE retention_floor SET min_retention = interval '0'"); sqlState(err) != "42501" {
		t.Errorf("as the runtime role, lowering the retention floor: err = %v, want 42501", err)
	}
}
