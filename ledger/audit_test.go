package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"

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

// A new recording's guards check its whole statement (migration 00019): a
// row without its history, a row born in a later state, or one bad event
// among many refuses the statement, and nothing it wrote is kept.
func TestDatabaseRefusesNewRecordingsWithoutTheirHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	insert := `INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, lane, created_at, updated_at, last_event_seq)
		VALUES ($1, 't', $2, $3, $4, 'batch', now(), now(), $5)`
	withEvents := func(events string) string {
		return `WITH r AS (` + insert + ` RETURNING id) INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at) ` + events
	}
	cases := []struct {
		name, sql, want string
		state           string
		seq             int
	}{
		{"a row alone", insert, "without a matching event", "received", 1},
		{"born eligible with only its received event",
			withEvents(`SELECT id, 1, NULL, 'received', 0, now() FROM r`), "without a matching event", "eligible", 2},
		{"born eligible, its second event entering another state",
			withEvents(`SELECT id, 1, NULL, 'received', 0, now() FROM r UNION ALL SELECT id, 2, 'received', 'expired', 0, now() FROM r`),
			"without a matching event", "eligible", 2},
		{"born received, its first event entering eligible",
			withEvents(`SELECT id, 1, NULL, 'eligible', 0, now() FROM r`), "without a matching event", "received", 1},
		{"born received, its first event at attempt 1",
			withEvents(`SELECT id, 1, NULL, 'received', 1, now() FROM r`), "without a matching event", "received", 1},
		{"born eligible, its second event at attempt 1",
			withEvents(`SELECT id, 1, NULL, 'received', 0, now() FROM r UNION ALL SELECT id, 2, 'received', 'eligible', 1, now() FROM r`),
			"without a matching event", "eligible", 2},
		{"born eligible, its second event a note of received",
			withEvents(`SELECT id, 1, NULL, 'received', 0, now() FROM r UNION ALL SELECT id, 2, 'received', 'received', 0, now() FROM r`),
			"without a matching event", "eligible", 2},
		{"born submitted", insert, "must start in state received", "submitted", 1},
		{"born at attempt 1", `INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, lane, created_at, updated_at, last_event_seq, attempt)
			VALUES ($1, 't', $2, $3, $4, 'batch', now(), now(), $5, 1)`, "must start in state received", "received", 1},
	}
	for i, c := range cases {
		id := fmt.Sprintf("0190c0de-0000-7000-8000-%012d", i)
		call := fmt.Sprintf("case-%d", i)
		_, err := b.pool.Exec(ctx, c.sql, id, call, digest(call), c.state, c.seq)
		if sqlState(err) != "CS001" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want CS001 %q", c.name, err, c.want)
		}
	}
	var n int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM recordings WHERE tenant_id = 't'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d recordings kept after the refused statements (%v), want 0", n, err)
	}

	// Fifty recordings born eligible with their histories in one statement
	// are taken.
	if _, err := b.pool.Exec(ctx, `WITH r AS (
			INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, lane, created_at, updated_at, last_event_seq)
			SELECT gen_random_uuid(), 't', 'many-' || g, encode(sha256(g::text::bytea), 'hex'), 'eligible', 'batch', now(), now(), 2
			FROM generate_series(1, 50) g RETURNING id)
		INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
		SELECT id, 1, NULL, 'received', 0, now() FROM r UNION ALL
		SELECT id, 2, 'received', 'eligible', 0, now() FROM r`); err != nil {
		t.Fatalf("50 recordings born eligible with their histories: %v", err)
	}
	// Their next events in one statement, one of them illegal, one a note
	// of no state, one a first event: each refuses the statement whole.
	for _, bad := range []struct{ event, want string }{
		{`'eligible', 'committed'`, "illegal transition eligible -> committed"},
		{`'eligible', 'bogus'`, "illegal transition eligible -> bogus"},
		{`'bogus', 'bogus'`, "names no state: bogus"},
		{`NULL, 'received'`, "must enter received"},
	} {
		_, err := b.pool.Exec(ctx, `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
			SELECT r.id, 3, x.prior_state, x.new_state, 0, now()
			FROM recordings r CROSS JOIN LATERAL (
				SELECT * FROM (VALUES (`+bad.event+`)) AS v (prior_state, new_state) WHERE r.call_id = 'many-37'
				UNION ALL SELECT 'eligible', 'submitted' WHERE r.call_id <> 'many-37') x
			WHERE r.tenant_id = 't'`)
		if sqlState(err) != "CS001" || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("50 events, one of them %s: %v, want CS001 %q", bad.event, err, bad.want)
		}
	}
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM recording_events e JOIN recordings r ON r.id = e.recording_id WHERE r.tenant_id = 't'").Scan(&n); err != nil || n != 100 {
		t.Fatalf("%d events of the 50 recordings (%v), want their 100 alone", n, err)
	}
}

// The audio digest's CHECK takes exactly the strings Go's
// `^[0-9a-f]{64}$` matches: drawn near-digests (a character replaced by
// upper case, another letter, a multi-byte character, or one removed or
// added; or a two-byte character in place of two, so that the text still
// has 64 bytes) are refused with a check violation naming it exactly when
// the expression does not match them. The check counts bytes and trims
// the hex digits (migration 00024), with no regular expression.
func TestDatabaseDigestCheckIsSixtyFourLowerHexDigits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	want := regexp.MustCompile(`^[0-9a-f]{64}$`)
	rapid.Check(t, func(rt *rapid.T) {
		// A digest, then an edit or none: a character replaced by one
		// drawn from near-misses, one removed or one added.
		d := []rune(rapid.StringMatching(`[0-9a-f]{64}`).Draw(rt, "digest"))
		c := rapid.SampledFrom([]rune("0aAfFgz é-")).Draw(rt, "char")
		i := rapid.IntRange(0, 63).Draw(rt, "at")
		switch rapid.IntRange(0, 4).Draw(rt, "edit") {
		case 1:
			d[i] = c
		case 2:
			d = append(d[:i], d[i+1:]...)
		case 3:
			d = append(d[:i], append([]rune{c}, d[i:]...)...)
		case 4:
			d[i] = 'é' // two bytes for one character: 65 bytes, then 64
			j := rapid.IntRange(0, 63).Filter(func(j int) bool { return j != i }).Draw(rt, "dropped")
			d = append(d[:j], d[j+1:]...)
		}
		var err error
		_ = inRolledBack(t, b.pool, func(tx pgx.Tx) error {
			_, err = tx.Exec(ctx, `INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, lane, created_at, updated_at, last_event_seq)
				VALUES (gen_random_uuid(), 't', 'digest', $1, 'received', 'batch', now(), now(), 1)`, string(d))
			return nil
		})
		var pgErr *pgconn.PgError
		refused := errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "recordings_audio_sha256_check"
		if matches := want.MatchString(string(d)); refused == matches {
			rt.Fatalf("digest %q (%d bytes): refused by the check %v, the expression matches %v (%v)", string(d), len(string(d)), refused, matches, err)
		}
		if !refused && sqlState(err) != "CS001" {
			rt.Fatalf("digest %q: %v, want the insert guard's CS001 (a row alone) once the check passes", string(d), err)
		}
	})
}
