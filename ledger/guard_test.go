package ledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/ledger"
)

// inRolledBack runs f in a transaction of its own that is rolled back.
func inRolledBack(t *testing.T, pool *pgxpool.Pool, f func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	return f(tx)
}

// The recording row's UPDATE guard over raw SQL, for every state a
// recording can be in, every state and a name that is none to move it to,
// every way the sequence and updated_at can move and every identity
// column: the statement itself is refused, with recording_guard's
// SQLSTATE (CS002 for identity, a sequence moving backward, or updated_at
// moving without an event or backward; CS001 for a change of state that
// appends no event or, in one step, is no edge of the Go state machine),
// exactly when the change breaks that rule, in the function's order:
// the guard held to the Go state machine pair by pair. Nothing commits,
// so recording_event_present is not reached.
func TestRecordingUpdateGuardRefusesExactlyTheBrokenRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	starts := map[ledger.State]ledger.Recording{}
	for _, path := range [][]ledger.State{
		{},
		{ledger.StateEligible},
		{ledger.StateEligible, ledger.StateSubmitted},
		{ledger.StateEligible, ledger.StateSubmitted, ledger.StateRetryWait},
		{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed},
		{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated},
		{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated, ledger.StateCommitted},
		{ledger.StateEligible, ledger.StateExpired},
		{ledger.StateEligible, ledger.StateFailed},
	} {
		r := b.walk(t, b.ingest(t), path...)
		starts[r.State] = r
	}
	if len(starts) != len(ledger.States()) {
		t.Fatalf("recordings in %d states, want one in each of %d", len(starts), len(ledger.States()))
	}
	identities := map[string]string{
		"":             "",
		"tenant_id":    ", tenant_id = tenant_id || '-other'",
		"call_id":      ", call_id = call_id || '-other'",
		"audio_sha256": ", audio_sha256 = repeat('0', 64)",
		"created_at":   ", created_at = created_at - interval '1 second'",
	}
	moves := map[string]string{"same": "updated_at", "forward": "updated_at + interval '1 second'", "backward": "updated_at - interval '1 second'"}
	cases := 0
	for _, r := range starts {
		for _, to := range append(ledger.States(), "bogus") {
			for steps := -1; steps <= 2; steps++ {
				for moved, at := range moves {
					for identity, set := range identities {
						if identity != "" && (steps != 1 || moved != "forward") {
							continue // identity: once per pair of states
						}
						want := ""
						switch {
						case identity != "", steps < 0, moved != "same" && (steps == 0 || moved == "backward"):
							want = "CS002"
						case to != r.State && (steps <= 0 || (steps == 1 && !ledger.CanTransition(r.State, to))):
							want = "CS001"
						}
						err := inRolledBack(t, b.pool, func(tx pgx.Tx) error {
							_, err := tx.Exec(ctx, `UPDATE recordings SET state = $2, last_event_seq = last_event_seq + $3,
								updated_at = `+at+set+` WHERE id = $1`, r.ID, string(to), steps)
							return err
						})
						cases++
						if got := sqlState(err); got != want {
							t.Errorf("%s -> %s, %d steps, updated_at %s, identity %q: %v (SQLSTATE %q), want SQLSTATE %q",
								r.State, to, steps, moved, identity, err, got, want)
						}
					}
				}
			}
		}
	}
	t.Logf("%d updates", cases)
}

// recording_events' insert guard over raw SQL, for every event: a first
// event (no prior state) or every prior state, every new state and a name
// that is none, at sequence numbers past the history (1 and 2 are the
// recording's own events: the (recording_id, seq) key would refuse them
// first; a legal first event is every ingest's). The
// insert is refused with SQLSTATE CS001 exactly when the event breaks the
// rule: a first event enters received at seq 1, a change of state is an
// edge of the Go state machine, a note names a state: the guard held to
// the state machine pair by pair.
func TestEventInsertGuardRefusesExactlyTheBrokenRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.ingest(t)
	names := append(ledger.States(), "bogus")
	priors := []any{nil}
	for _, s := range names {
		priors = append(priors, string(s))
	}
	cases := 0
	for _, prior := range priors {
		for _, to := range names {
			for _, seq := range []int{100, 101} {
				var legal bool
				switch p, _ := prior.(string); {
				case prior == nil:
					legal = to == ledger.StateReceived && seq == 1
				case ledger.State(p) != to:
					legal = ledger.CanTransition(ledger.State(p), to)
				default:
					legal = to.Valid()
				}
				err := inRolledBack(t, b.pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
						VALUES ($1, $2, $3, $4, 0, now())`, r.ID, seq, prior, string(to))
					return err
				})
				cases++
				if got := sqlState(err); legal == (got == "CS001") || (legal && err != nil) {
					t.Errorf("event %v -> %s at seq %d (legal %v): %v (SQLSTATE %q)", prior, to, seq, legal, err, got)
				}
			}
		}
	}
	t.Logf("%d inserts", cases)
}
