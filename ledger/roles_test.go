package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
)

// The review's bypasses, tried as the runtime role (what workers, serve
// and the CLI act as): each is refused, by a privilege the role lacks or
// by a guard, and the history is untouched.
func TestRuntimeRoleCannotRewriteHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated,
		ledger.StateCommitted)
	id := r.ID.String()
	// The rows the outbox and the pipeline write, written here as the owner.
	for _, stmt := range []string{
		`INSERT INTO transcripts (recording_id, provider, text, confidence, duration_seconds, created_at)
		 VALUES ('` + id + `', 'p', 'hello', 0.9, 1, now())`,
		`INSERT INTO action_sets (recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at)
		 VALUES ('` + id + `', 't', 'c', 1, 'x', '[]', now())`,
		`INSERT INTO outbox (action_set_id, target, scope, idempotency_key, created_at, updated_at, deadline)
		 SELECT id, 'webhook', 's', 'k', now(), now(), now() + interval '1 day' FROM action_sets`,
		`INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome) SELECT id, 1, now(), 'pending', 'pending', 'x' FROM outbox`,
	} {
		if _, err := b.pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: "s", NotBefore: b.clock.Now(), RecordingID: r.ID}); err != nil {
		t.Fatal(err)
	}
	rt := testdb.AsRuntime(t, b.pool)

	attempts := []string{
		// the session setting the guards trusted before
		"SET LOCAL callscribe.retention_purge = 'on'; DELETE FROM recording_events",
		"SET LOCAL callscribe.retention_purge = 'on'; DELETE FROM recordings",
		"DELETE FROM recording_events",
		"DELETE FROM recordings",
		"UPDATE transcripts SET text = 'rewritten'",
		"DELETE FROM transcripts",
		"TRUNCATE action_sets CASCADE",
		"DELETE FROM action_sets",
		"UPDATE action_sets SET actions = '[{}]'",
		"DELETE FROM outbox",
		"TRUNCATE outbox CASCADE",
		"UPDATE outbox SET idempotency_key = 'other'",
		"DELETE FROM outbox_events",
		"UPDATE outbox_events SET outcome = 'rewritten'",
		"DELETE FROM scope_deferral_extensions",
		"INSERT INTO recording_state_edges (from_state, to_state) VALUES ('committed', 'received')",
		"DELETE FROM recording_state_edges",
		"UPDATE recording_states SET terminal = false",
		"UPDATE recordings SET updated_at = updated_at - interval '1 year'",
		"UPDATE recordings SET tenant_id = 'other'",
		"DELETE FROM retention_purges",
		"INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted) VALUES (now(), now(), 0, 0)",
		"ALTER TABLE recording_events DISABLE TRIGGER ALL",
		"ALTER TABLE recordings DROP CONSTRAINT recordings_business_key",
		"DROP TABLE outbox_events",
		"DROP FUNCTION callscribe_purging()",
		"CREATE OR REPLACE FUNCTION callscribe_purging() RETURNS boolean LANGUAGE sql AS 'SELECT true'",
		"SET ROLE callscribe_purge",
	}
	for _, stmt := range attempts {
		err := pgx.BeginFunc(ctx, rt, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		if code := sqlState(err); code != "42501" && code != "CS001" && code != "CS002" && code != "42883" {
			t.Errorf("as the runtime role, %s: err = %v (SQLSTATE %q), want refused", stmt, err, code)
		}
	}

	// Not even the owner can use the setting: the guards want the purge
	// function's own role.
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SET LOCAL callscribe.retention_purge = 'on'; DELETE FROM recording_events")
		return err
	})
	if sqlState(err) != "CS002" {
		t.Errorf("as the owner with the setting: err = %v, want CS002", err)
	}

	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil || len(evs) != 6 {
		t.Fatalf("history after the attempts: %d events, %v; want 6 untouched", len(evs), err)
	}
	var n int
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM transcripts WHERE text = 'hello') + (SELECT count(*) FROM action_sets)
		+ (SELECT count(*) FROM outbox WHERE idempotency_key = 'k') + (SELECT count(*) FROM outbox_events WHERE outcome = 'x')
		+ (SELECT count(*) FROM scope_deferral_extensions)`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("rows after the attempts: %d (%v), want 5 untouched", n, err)
	}

	// What the runtime role may do: the purge, through its one function,
	// which removes the whole footprint and records it.
	lrt, err := ledger.New(rt, &ledger.Config{Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(100 * 24 * time.Hour)
	// A delivery still pending keeps the history.
	if res, err := lrt.RetentionPurge(ctx, ledger.PurgeOpts{}, nil); err != nil || res.Recordings != 0 {
		t.Fatalf("purge with a delivery pending = %+v, %v; want nothing removed", res, err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE outbox SET state = 'delivered'"); err != nil {
		t.Fatal(err)
	}
	res, err := lrt.RetentionPurge(ctx, ledger.PurgeOpts{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Recordings != 1 || res.Events != 6 || res.Transcripts != 1 || res.ActionSets != 1 || res.OutboxRows != 1 ||
		res.OutboxEvents != 1 || res.Extensions != 1 {
		t.Fatalf("purge as the runtime role = %+v", res)
	}
}
