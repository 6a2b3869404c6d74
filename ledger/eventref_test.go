package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger"
)

// insertNote inserts a note event (the state kept) of recording id in state at
// seq: legal for every guard but the recording's existence.
const insertNote = `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
	VALUES ($1, $2, $3, $3, 0, now())`

// The events' recording is checked once per statement (migration 00021),
// as strictly as the foreign key was: an event of no recording is refused
// with foreign_key_violation, alone or beside good events, and nothing of
// the statement is kept.
func TestDatabaseRefusesEventsWithoutTheirRecording(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.ingest(t)
	missing := uuid.Must(uuid.NewV7())

	err := inRolledBack(t, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, insertNote, r.ID, 100, string(r.State))
		return err
	})
	if err != nil {
		t.Fatalf("a note of an existing recording: %v", err)
	}
	if _, err := b.pool.Exec(ctx, insertNote, missing, 1, "received"); sqlState(err) != "23503" {
		t.Errorf("an event of no recording: %v, want SQLSTATE 23503", err)
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
		SELECT id, seq, $3, $3, 0, now() FROM unnest($1::uuid[], $2::int[]) AS u(id, seq)`,
		[]uuid.UUID{r.ID, missing, r.ID}, []int32{100, 100, 101}, string(r.State))
	if sqlState(err) != "23503" {
		t.Errorf("good events beside one of no recording: %v, want SQLSTATE 23503", err)
	}
	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil || len(evs) != r.EventSeq {
		t.Fatalf("the recording's history after the refused statements: %d events (%v), want %d", len(evs), err, r.EventSeq)
	}
}

// A recording is not deleted while it keeps events: the purge deletes
// its events first (and does, TestRetentionPurgeRemovesOnlyOldTerminalHistories);
// a delete of the recording alone is refused with foreign_key_violation,
// and a delete at any isolation but read committed is refused.
func TestDatabaseRefusesDeletingARecordingThatKeepsEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateFailed)
	purge := func(iso pgx.TxIsoLevel, events bool) error {
		tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// As the purge runs: its function's owner, with the purge's flag.
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE callscribe_purge"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT set_config('callscribe.retention_purge', 'on', true)"); err != nil {
			t.Fatal(err)
		}
		if events {
			if _, err := tx.Exec(ctx, "DELETE FROM recording_events WHERE recording_id = $1", r.ID); err != nil {
				t.Fatalf("deleting the events: %v", err)
			}
		}
		_, err = tx.Exec(ctx, "DELETE FROM recordings WHERE id = $1", r.ID)
		return err
	}
	if err := purge(pgx.ReadCommitted, true); err != nil {
		t.Errorf("the events, then the recording: %v", err)
	}
	if err := purge(pgx.ReadCommitted, false); sqlState(err) != "23503" {
		t.Errorf("the recording alone: %v, want SQLSTATE 23503", err)
	}
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		if err := purge(iso, true); sqlState(err) != "CS001" {
			t.Errorf("the events, then the recording, at %s: %v, want SQLSTATE CS001", iso, err)
		}
	}
	if evs, err := b.ledger.Events(ctx, r.ID); err != nil || len(evs) != 3 {
		t.Fatalf("the recording's history after the rolled-back deletes: %d events, %v", len(evs), err)
	}
}

// An event and a purge of its recording at once leave no event without
// its recording, in either order (the lock the check takes, FOR KEY
// SHARE, is the foreign key's):
//   - the purge holds the recording first: the event's statement waits
//     for it, then finds no recording and is refused;
//   - the event's transaction holds it first: the purge passes over the
//     recording (SKIP LOCKED) and deletes it, with the event, on its next
//     run.
func TestEventAndPurgeOfItsRecordingAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateFailed)
	second := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateFailed)
	b.clock.Advance(100 * 24 * time.Hour)

	// The purge first: a transaction holds the recording FOR UPDATE, as
	// the purge's victims are held, and deletes its history.
	purger, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = purger.Rollback(ctx) }()
	if _, err := purger.Exec(ctx, "SELECT 1 FROM recordings WHERE id = $1 FOR UPDATE", first.ID); err != nil {
		t.Fatal(err)
	}
	noted := make(chan error, 1)
	go func() {
		_, err := b.pool.Exec(ctx, insertNote, first.ID, 100, string(first.State))
		noted <- err
	}()
	waitForLockWait(t, b, "INSERT INTO recording_events")
	for _, q := range []string{"SET LOCAL ROLE callscribe_purge", "SELECT set_config('callscribe.retention_purge', 'on', true)",
		"DELETE FROM recording_events WHERE recording_id = '" + first.ID.String() + "'",
		"DELETE FROM recordings WHERE id = '" + first.ID.String() + "'"} {
		if _, err := purger.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := purger.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-noted; sqlState(err) != "23503" {
		t.Fatalf("the note of a recording purged while it waited: %v, want SQLSTATE 23503", err)
	}

	// The event first: its transaction holds the recording until it
	// commits; the purge passes over it, and takes it on its next run.
	writer, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback(ctx) }()
	if _, err := writer.Exec(ctx, insertNote, second.ID, 100, string(second.State)); err != nil {
		t.Fatal(err)
	}
	res, err := b.ledger.RetentionPurge(ctx, ledger.PurgeOpts{OlderThan: 90 * 24 * time.Hour, BatchSize: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Recordings != 0 {
		t.Fatalf("the purge deleted %d recordings while an event of the only one left was being written", res.Recordings)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err = b.ledger.RetentionPurge(ctx, ledger.PurgeOpts{OlderThan: 90 * 24 * time.Hour, BatchSize: 10}, nil); err != nil {
		t.Fatal(err)
	}
	if res.Recordings != 1 || res.Events != 4 {
		t.Fatalf("the next purge: %+v, want the recording with its 4 events", res)
	}
	var orphans int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM recording_events e
		WHERE NOT EXISTS (SELECT 1 FROM recordings r WHERE r.id = e.recording_id)`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d events without their recording (%v)", orphans, err)
	}
	if _, err := b.ledger.Recording(ctx, second.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the recording after the second purge: %v, want ErrNotFound", err)
	}
}

// waitForLockWait waits until a session of the test's database running a
// statement that starts with prefix waits for a lock.
func waitForLockWait(t *testing.T, b *bundle, prefix string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(query, $1)`, prefix).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement %q waits for a lock after 30s", prefix)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
