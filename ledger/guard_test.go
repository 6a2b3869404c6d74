package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
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
// column: the statement itself is refused, with recording_update_guard's
// SQLSTATE and message, exactly when the change breaks that rule, in the
// guard's order: a sequence below 1 first (23514, the table's CHECK, which
// runs before the trigger); CS002 for identity, a sequence moving
// backward, or updated_at moving without an event or backward; CS001 for a
// change of state that appends no event, a move of one step that is no
// edge of the Go state machine, and a row left without its matching last
// event, as every one of these is: they write no event. The guard held to
// the Go state machine pair by pair. The same moves of one step with
// their event written in the same statement (rawMove) pass exactly when
// they are a note or an edge.
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
						want, says := "", ""
						switch {
						case r.EventSeq+steps < 1: // the table's CHECK, before any trigger
							want, says = "23514", "recordings_last_event_seq_check"
						case identity != "":
							want, says = "CS002", "identity columns are immutable"
						case steps < 0:
							want, says = "CS002", "may not move backward"
						case moved != "same" && (steps == 0 || moved == "backward"):
							want, says = "CS002", "updated_at moves only forward"
						case to != r.State && steps == 0:
							want, says = "CS001", "must append one event per step"
						case to != r.State && steps == 1 && !ledger.CanTransition(r.State, to):
							want, says = "CS001", "illegal transition"
						case to != r.State || steps > 0:
							want, says = "CS001", "without a matching event"
						}
						err := inRolledBack(t, b.pool, func(tx pgx.Tx) error {
							_, err := tx.Exec(ctx, `UPDATE recordings SET state = $2, last_event_seq = last_event_seq + $3,
								updated_at = `+at+set+` WHERE id = $1`, r.ID, string(to), steps)
							return err
						})
						cases++
						if got := sqlState(err); got != want || (err != nil && !strings.Contains(err.Error(), says)) {
							t.Errorf("%s -> %s, %d steps, updated_at %s, identity %q: %v (SQLSTATE %q), want SQLSTATE %q saying %q",
								r.State, to, steps, moved, identity, err, got, want, says)
						}
					}
				}
			}
		}
	}
	// The same moves of one step with their event, in one statement: a
	// note (the state kept) or an edge passes, anything else is refused.
	for _, r := range starts {
		for _, to := range append(ledger.States(), "bogus") {
			want := "CS001"
			if to == r.State || ledger.CanTransition(r.State, to) {
				want = ""
			}
			err := inRolledBack(t, b.pool, func(tx pgx.Tx) error {
				return rawMove(ctx, tx, r.ID, r.EventSeq, string(to), 1, 0,
					[]rawEvent{{prior: string(r.State), next: string(to), attempt: r.Attempt}})
			})
			cases++
			if got := sqlState(err); got != want {
				t.Errorf("%s -> %s with its event: %v (SQLSTATE %q), want SQLSTATE %q", r.State, to, err, got, want)
			}
		}
	}
	t.Logf("%d updates", cases)
}

// rawEvent is an event rawMove appends: prior -> next, at attempt.
type rawEvent struct {
	prior, next string
	attempt     int
}

// rawMove moves recording id, whose last event is seq, to state to in one
// statement, bypassing Go: its sequence on by jump and its attempt by
// attemptInc, with evs appended as events seq+1 on at the row's
// updated_at. One statement, as callscribe writes every move: the guards
// check the row and its events at the statement's end.
func rawMove(ctx context.Context, tx pgx.Tx, id uuid.UUID, seq int, to string, jump, attemptInc int, evs []rawEvent) error {
	seqs, attempts := make([]int32, len(evs)), make([]int32, len(evs))
	priors, nexts := make([]string, len(evs)), make([]string, len(evs))
	for i, e := range evs {
		seqs[i], priors[i], nexts[i], attempts[i] = int32(seq+1+i), e.prior, e.next, int32(e.attempt)
	}
	_, err := tx.Exec(ctx, `WITH upd AS (
			UPDATE recordings SET state = $2, last_event_seq = last_event_seq + $3, attempt = attempt + $4
			WHERE id = $1 RETURNING updated_at)
		INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
		SELECT $1, e.seq, e.prior, e.next, e.attempt, upd.updated_at
		FROM upd, unnest($5::integer[], $6::text[], $7::text[], $8::integer[]) AS e (seq, prior, next, attempt)`,
		id, to, jump, attemptInc, seqs, priors, nexts, attempts)
	return err
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
