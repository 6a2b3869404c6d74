package ledger_test

import (
	"context"
	"testing"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/ledger"
)

// The recording row's UPDATE guard over raw SQL, for every change rapid
// draws (a state, how many events the sequence moves, updated_at, an
// identity column): the statement itself is refused, with recording_guard's
// SQLSTATE (CS002 for identity, a sequence moving backward or updated_at
// moving without an event or backward; CS001 for a change of state that
// appends no event or, in one step, is no edge of the state machine),
// exactly when the change breaks that rule, checked in the function's
// order. The trigger calls the function only when its WHEN condition says
// the row may break the rule (migration 00022), so this holds the
// condition to the rule; the commit-time check of the events
// (recording_event_present) is not reached, as nothing commits.
func TestRecordingUpdateGuardRefusesExactlyTheBrokenRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	starts := map[ledger.State]ledger.Recording{}
	for _, path := range [][]ledger.State{
		{},
		{ledger.StateEligible},
		{ledger.StateEligible, ledger.StateSubmitted},
		{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed},
		{ledger.StateEligible, ledger.StateFailed},
	} {
		r := b.walk(t, b.ingest(t), path...)
		starts[r.State] = r
	}
	var from []ledger.State
	for s := range starts {
		from = append(from, s)
	}
	rapid.Check(t, func(rt *rapid.T) {
		r := starts[rapid.SampledFrom(from).Draw(rt, "from")]
		to := rapid.SampledFrom(append(ledger.States(), "bogus")).Draw(rt, "to")
		steps := rapid.IntRange(-1, 3).Draw(rt, "steps")
		moved := rapid.SampledFrom([]string{"same", "forward", "backward"}).Draw(rt, "updated_at")
		identity := rapid.SampledFrom([]string{"", "tenant_id", "call_id", "audio_sha256", "created_at"}).Draw(rt, "identity")

		want := ""
		switch {
		case identity != "", steps < 0, moved != "same" && (steps == 0 || moved == "backward"):
			want = "CS002"
		case to != r.State && (steps <= 0 || (steps == 1 && !ledger.CanTransition(r.State, to))):
			want = "CS001"
		}

		tx, err := b.pool.Begin(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		set := map[string]string{
			"":             "",
			"tenant_id":    ", tenant_id = tenant_id || '-other'",
			"call_id":      ", call_id = call_id || '-other'",
			"audio_sha256": ", audio_sha256 = repeat('0', 64)",
			"created_at":   ", created_at = created_at - interval '1 second'",
		}[identity]
		at := map[string]string{"same": "updated_at", "forward": "updated_at + interval '1 second'", "backward": "updated_at - interval '1 second'"}[moved]
		_, err = tx.Exec(ctx, `UPDATE recordings SET state = $2, last_event_seq = last_event_seq + $3, updated_at = `+at+set+`
			WHERE id = $1`, r.ID, string(to), steps)
		if got := sqlState(err); got != want && !(want == "" && err == nil) {
			rt.Fatalf("%s -> %s, %d steps, updated_at %s, identity %q: %v (SQLSTATE %q), want SQLSTATE %q",
				r.State, to, steps, moved, identity, err, got, want)
		}
	})
}
