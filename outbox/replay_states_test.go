package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/internal/testdb"
)

// The database's replay states match this model: a run moves enumerating
// -> running -> done, or to cancelled from either active state; a
// delivery moves from pending to one end and never again. Random
// sequences of raw UPDATEs, run as the runtime role, are accepted exactly
// when the model allows them; a refused one changes nothing.
func TestReplayStatesMatchTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.AsRuntime(t, testdb.New(t))
	runMoves := map[string][]string{"enumerating": {"running", "cancelled"}, "running": {"done", "cancelled"}}
	runStates := []string{"enumerating", "running", "done", "cancelled"}
	deliveryStates := []string{"pending", "delivered", "dead", "cancelled"}
	rapid.Check(t, func(rt *rapid.T) {
		var run int64
		if err := db.QueryRow(ctx, `INSERT INTO replay_runs (target, scope, recording_state, window_from, window_to, started_by,
			delivery_deadline, created_at, updated_at) VALUES ('s', 'crm:replay:s', 'committed', now() - interval '1 day', now(), 't@h',
			interval '1 hour', now(), now()) RETURNING id`).Scan(&run); err != nil {
			rt.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO replay_deliveries (run_id, action_set_id, deadline, created_at, updated_at)
			VALUES ($1, 1, now() + interval '1 hour', now(), now())`, run); err != nil {
			rt.Fatal(err)
		}
		runState, deliveryState := "enumerating", "pending"
		for i := range rapid.IntRange(1, 8).Draw(rt, "steps") {
			if rapid.Bool().Draw(rt, fmt.Sprintf("run%d", i)) {
				to := rapid.SampledFrom(runStates).Draw(rt, fmt.Sprintf("run_to%d", i))
				allowed := to == runState || slices.Contains(runMoves[runState], to)
				_, err := db.Exec(ctx, `UPDATE replay_runs SET state = $2, updated_at = $3 WHERE id = $1`, run, to, time.Now())
				check(rt, "run", runState, to, allowed, err)
				if allowed {
					runState = to
				}
			} else {
				to := rapid.SampledFrom(deliveryStates).Draw(rt, fmt.Sprintf("delivery_to%d", i))
				allowed := to == deliveryState || deliveryState == "pending"
				_, err := db.Exec(ctx, `UPDATE replay_deliveries SET state = $2 WHERE run_id = $1 AND action_set_id = 1`, run, to)
				check(rt, "delivery", deliveryState, to, allowed, err)
				if allowed {
					deliveryState = to
				}
			}
			var gotRun, gotDelivery string
			if err := db.QueryRow(ctx, `SELECT r.state, d.state FROM replay_runs r JOIN replay_deliveries d ON d.run_id = r.id
				WHERE r.id = $1`, run).Scan(&gotRun, &gotDelivery); err != nil {
				rt.Fatal(err)
			}
			if gotRun != runState || gotDelivery != deliveryState {
				rt.Fatalf("database: run %s, delivery %s; model: %s, %s", gotRun, gotDelivery, runState, deliveryState)
			}
		}
		// The runtime role deletes nothing of a run.
		if _, err := db.Exec(ctx, `DELETE FROM replay_deliveries WHERE run_id = $1`, run); err == nil {
			rt.Fatal("the runtime role deleted a replay delivery")
		}
	})
}

func check(rt *rapid.T, what, from, to string, allowed bool, err error) {
	switch {
	case allowed && err != nil:
		rt.Fatalf("%s %s -> %s refused: %v", what, from, to, err)
	case !allowed && err == nil:
		rt.Fatalf("%s %s -> %s accepted", what, from, to)
	case !allowed:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "CS001" {
			rt.Fatalf("%s %s -> %s: %v, want SQLSTATE CS001", what, from, to, err)
		}
	}
}
