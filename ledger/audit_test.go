package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/callscribe/callscribe/ledger"
)

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// The database itself refuses to rewrite history, whatever SQL is sent.
func TestEventsAreAppendOnlyInTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted, ledger.StateFailed)
	// Row triggers fire only on rows: give every audited table one.
	if _, err := b.ledger.RetentionPurge(ctx, ledger.PurgeOpts{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: "s", NotBefore: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}

	refused := []string{
		"UPDATE recording_events SET reason = 'rewritten'",
		"UPDATE recording_events SET new_state = 'committed' WHERE seq = 4",
		"DELETE FROM recording_events",
		"DELETE FROM recording_events WHERE recording_id = '" + r.ID.String() + "'",
		"TRUNCATE recording_events CASCADE",
		"DELETE FROM recordings",
		"UPDATE recordings SET tenant_id = 'other'",
		"UPDATE recordings SET state = 'committed', last_event_seq = last_event_seq + 1",
		"UPDATE recordings SET last_event_seq = 1",
		"UPDATE recordings SET updated_at = updated_at - interval '1 year'",   // would make it purgeable at once
		"UPDATE recordings SET updated_at = updated_at + interval '1 second'", // moves only with an event
		"TRUNCATE transcripts CASCADE",
		"TRUNCATE action_sets CASCADE",
		"UPDATE recording_state_edges SET to_state = 'committed'",
		"DELETE FROM recording_states WHERE name = 'failed'",
		"UPDATE retention_purges SET reason = 'x'",
		"DELETE FROM retention_purges",
		"DELETE FROM scope_deferral_extensions",
		"UPDATE scope_deferral_extensions SET reason = 'x'",
		"TRUNCATE scope_deferral_extensions",
		"TRUNCATE retention_purges CASCADE",
		"TRUNCATE recordings CASCADE",
		"UPDATE scope_deferrals SET not_before = not_before - interval '1 second'",
	}
	for _, stmt := range refused {
		_, err := b.pool.Exec(ctx, stmt)
		if code := sqlState(err); code != "CS001" && code != "CS002" {
			t.Errorf("%s: err = %v (SQLSTATE %q), want refused by a trigger", stmt, err, code)
		}
	}
	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil || len(evs) != 4 {
		t.Fatalf("history after the attempts: %d events, %v; want 4 untouched", len(evs), err)
	}
	if _, err := ledger.Replay(evs); err != nil {
		t.Fatal(err)
	}
}

// Raw SQL cannot skip a state or change state without its event.
func TestDatabaseRefusesIllegalEdges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.ingest(t)

	_, err := b.pool.Exec(ctx, "UPDATE recordings SET state = 'submitted', last_event_seq = 2 WHERE id = $1", r.ID)
	if sqlState(err) != "CS001" {
		t.Fatalf("received -> submitted by raw SQL: %v, want CS001", err)
	}
	// A legal edge without its event is refused at commit.
	_, err = b.pool.Exec(ctx, "UPDATE recordings SET state = 'eligible', last_event_seq = 2 WHERE id = $1", r.ID)
	if sqlState(err) != "CS001" || !strings.Contains(err.Error(), "without a matching event") {
		t.Fatalf("state change without an event: %v, want CS001 at commit", err)
	}
	// An event with an illegal edge is refused.
	_, err = b.pool.Exec(ctx, `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
		VALUES ($1, 2, 'received', 'committed', 0, now())`, r.ID)
	if sqlState(err) != "CS001" {
		t.Fatalf("illegal event: %v, want CS001", err)
	}
	// A recording cannot be born in a later state.
	_, err = b.pool.Exec(ctx, `INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, lane, created_at, updated_at, last_event_seq)
		VALUES (gen_random_uuid(), 't', 'c', $1, 'committed', 'batch', now(), now(), 1)`, digest("x"))
	if sqlState(err) != "CS001" {
		t.Fatalf("insert in committed: %v, want CS001", err)
	}
	// The Go API reports a database refusal as the typed error.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE recordings SET state = 'validated', last_event_seq = 2 WHERE id = $1", r.ID)
		return err
	})
	if sqlState(err) != "CS001" {
		t.Fatalf("received -> validated in a transaction: %v", err)
	}
}

func TestRetentionPurgeRemovesOnlyOldTerminalHistories(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	oldDone := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateFailed)
	oldOpen := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	b.clock.Advance(100 * 24 * time.Hour)
	newDone := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateExpired)

	res, err := b.ledger.RetentionPurge(ctx, ledger.PurgeOpts{OlderThan: 90 * 24 * time.Hour, BatchSize: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Recordings != 1 || res.Events != 3 {
		t.Fatalf("purge = %+v, want 1 recording with 3 events", res)
	}
	if _, err := b.ledger.Recording(ctx, oldDone.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("old terminal recording after purge: %v, want ErrNotFound", err)
	}
	for _, r := range []ledger.Recording{oldOpen, newDone} {
		evs, err := b.ledger.Events(ctx, r.ID)
		if err != nil || len(evs) != 3 {
			t.Fatalf("recording %s lost history: %d events, %v", r.State, len(evs), err)
		}
	}
	var batches, recs, evs int
	if err := b.pool.QueryRow(ctx, "SELECT count(*), sum(recordings_deleted), sum(events_deleted) FROM retention_purges").
		Scan(&batches, &recs, &evs); err != nil {
		t.Fatal(err)
	}
	if batches != res.Batches || recs != 1 || evs != 3 {
		t.Fatalf("audit of the purge: %d batches, %d recordings, %d events; want %d, 1, 3", batches, recs, evs, res.Batches)
	}

	// Even a session that sets the purge flag by hand cannot delete the
	// history of a recording that is not terminal.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('callscribe.retention_purge', 'on', true)"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM recording_events WHERE recording_id = $1", oldOpen.ID)
		return err
	})
	if sqlState(err) != "CS002" {
		t.Fatalf("hand-flagged delete of an open history: %v, want CS002", err)
	}
}
