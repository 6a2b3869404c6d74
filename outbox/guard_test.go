package outbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/outbox"
)

// The outbox row's guard over raw SQL, for every change of state and of
// identity rapid draws, by a statement naming any of the guarded columns
// (the trigger is called only when one is named: migration 00023): the
// update is refused (SQLSTATE CS001 for a state change not allowed, CS002
// for a changed identity) exactly when it breaks the rule, and kept
// otherwise.
func TestOutboxGuardRefusesExactlyTheBrokenRule(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook"}})
	ctx := context.Background()
	res, err := b.outbox.Commit(ctx, b.client, b.validated(t, "acme"), someActions)
	if err != nil || len(res.OutboxIDs) != 1 {
		t.Fatalf("commit = %+v, %v", res, err)
	}
	id := res.OutboxIDs[0]
	states := []string{outbox.StatePending, outbox.StateDelivered, outbox.StateDead}
	allowed := map[[2]string]bool{
		{outbox.StatePending, outbox.StateDelivered}: true,
		{outbox.StatePending, outbox.StateDead}:      true,
		{outbox.StateDead, outbox.StatePending}:      true,
	}
	rapid.Check(t, func(rt *rapid.T) {
		from := rapid.SampledFrom(states).Draw(rt, "from")
		to := rapid.SampledFrom(states).Draw(rt, "to")
		newKey := rapid.Bool().Draw(rt, "new_key")
		newSet := rapid.Bool().Draw(rt, "new_set")
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// The starting state, set past the guard as its owner would.
		if _, err := tx.Exec(ctx, "ALTER TABLE outbox DISABLE TRIGGER outbox_guard"); err != nil {
			rt.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "UPDATE outbox SET state = $2 WHERE id = $1", id, from); err != nil {
			rt.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE outbox ENABLE TRIGGER outbox_guard"); err != nil {
			rt.Fatal(err)
		}
		// Which of the guarded columns the statement names: one it does
		// not name keeps its value.
		set := []string{"attempts = attempts"}
		named := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"state", "idempotency_key", "action_set_id"}), 0, 3,
			rapid.ID[string]).Draw(rt, "named")
		nameState, nameKey, nameSet := slices.Contains(named, "state"), slices.Contains(named, "idempotency_key"), slices.Contains(named, "action_set_id")
		if nameState {
			set = append(set, "state = $2")
		}
		if nameKey {
			set = append(set, "idempotency_key = CASE WHEN $3 THEN idempotency_key || ':other' ELSE idempotency_key END")
		}
		if nameSet {
			set = append(set, "action_set_id = CASE WHEN $4 THEN action_set_id + 1000000 ELSE action_set_id END")
		}
		_, err = tx.Exec(ctx, `UPDATE outbox SET `+strings.Join(set, ", ")+`
			WHERE id = $1 AND $2::text IS NOT NULL AND $3::boolean IS NOT NULL AND $4::boolean IS NOT NULL`,
			id, to, newKey, newSet)
		var want string
		switch {
		case nameState && from != to && !allowed[[2]string{from, to}]:
			want = "CS001"
		case (nameKey && newKey) || (nameSet && newSet):
			want = "CS002"
		}
		var pe *pgconn.PgError
		got := ""
		if errors.As(err, &pe) {
			got = pe.Code
		} else if err != nil {
			rt.Fatalf("%s -> %s: %v", from, to, err)
		}
		if got != want {
			rt.Fatalf("%s -> %s, new key %v, new set %v: SQLSTATE %q, want %q (%v)", from, to, newKey, newSet, got, want, err)
		}
	})
}
