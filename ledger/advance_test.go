package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger"
)

// advance applies a in a transaction of its own.
func (b *bundle) advance(t *testing.T, a ledger.Advance) (ledger.Recording, error) {
	t.Helper()
	var rec ledger.Recording
	err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		rec, err = b.ledger.AdvanceTx(context.Background(), tx, a)
		return err
	})
	return rec, err
}

// A transcript received, validated and committed in one statement: one row
// update, one event per step, the transcript stored, the history replays.
func TestAdvanceOneEventPerStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	pid := "tr_9"
	tr := ledger.Transcript{Provider: "generic-http", ProviderID: pid, Text: "call me back", Language: "en", Confidence: 0.8,
		Segments: []ledger.Segment{{Start: 0, End: 1, Text: "call me back", Confidence: 0.8}}}
	got, err := b.advance(t, ledger.Advance{RecordingID: r.ID, Transcript: &tr, Steps: []ledger.Transition{
		{From: ledger.StateSubmitted, To: ledger.StateTranscribed, Reason: "transcript received", ResponseClass: "completed", ProviderID: &pid},
		{From: ledger.StateTranscribed, To: ledger.StateValidated, Reason: "transcript valid", Detail: map[string]any{"k": "v"}},
		{From: ledger.StateValidated, To: ledger.StateCommitted, Reason: "action set v1 committed"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.StateCommitted || got.EventSeq != r.EventSeq+3 || got.Attempt != r.Attempt || got.ProviderID != pid {
		t.Fatalf("row after the move: %+v (before %+v)", got.Snapshot(), r.Snapshot())
	}
	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-3:]
	want := [][2]ledger.State{{ledger.StateSubmitted, ledger.StateTranscribed}, {ledger.StateTranscribed, ledger.StateValidated},
		{ledger.StateValidated, ledger.StateCommitted}}
	for i, ev := range last {
		if ev.Prior != want[i][0] || ev.New != want[i][1] || ev.Seq != r.EventSeq+1+i || ev.Attempt != r.Attempt {
			t.Fatalf("event %d = %+v, want %s -> %s at seq %d", i, ev, want[i][0], want[i][1], r.EventSeq+1+i)
		}
	}
	if last[0].ResponseClass != "completed" || last[1].Detail["k"] != "v" || last[2].Reason != "action set v1 committed" {
		t.Fatalf("the steps' own reason, class and detail: %+v", last)
	}
	snap, err := ledger.Replay(evs)
	if err != nil || snap != got.Snapshot() {
		t.Fatalf("replay = %+v, %v; row %+v", snap, err, got.Snapshot())
	}
	stored, err := b.ledger.Transcript(ctx, r.ID)
	if err != nil || stored.Text != tr.Text || stored.ProviderID != pid || len(stored.Segments) != 1 {
		t.Fatalf("transcript = %+v, %v", stored, err)
	}
}

// An eligible recording advanced through submitted counts the attempt on
// the submitted event and keeps it on the events after.
func TestAdvanceAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted, ledger.StateRetryWait)
	got, err := b.advance(t, ledger.Advance{RecordingID: r.ID, Steps: []ledger.Transition{
		{From: ledger.StateRetryWait, To: ledger.StateEligible}, {From: ledger.StateEligible, To: ledger.StateSubmitted},
		{From: ledger.StateSubmitted, To: ledger.StateFailed},
	}})
	if err != nil || got.Attempt != 2 || got.State != ledger.StateFailed {
		t.Fatalf("advance: %+v, %v", got.Snapshot(), err)
	}
	evs, err := b.ledger.Events(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := len(evs)
	if evs[n-3].Attempt != 1 || evs[n-2].Attempt != 2 || evs[n-1].Attempt != 2 {
		t.Fatalf("attempts on the three events: %d %d %d, want 1 2 2", evs[n-3].Attempt, evs[n-2].Attempt, evs[n-1].Attempt)
	}
}

// Go refuses a chain that is not one: a gap, an illegal edge, no steps, a
// transcript missing or out of place, fields that belong to one
// transition; a stale caller loses the compare-and-set and writes nothing.
func TestAdvanceRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	tr := &ledger.Transcript{Text: "x"}
	raw := "3"
	for name, c := range map[string]struct {
		a    ledger.Advance
		want error
	}{
		"no steps": {ledger.Advance{RecordingID: r.ID}, ledger.ErrInvalid},
		"gap": {ledger.Advance{RecordingID: r.ID, Transcript: tr, Steps: []ledger.Transition{
			{From: ledger.StateSubmitted, To: ledger.StateTranscribed}, {From: ledger.StateValidated, To: ledger.StateCommitted}}}, ledger.ErrInvalid},
		"illegal edge": {ledger.Advance{RecordingID: r.ID, Steps: []ledger.Transition{
			{From: ledger.StateSubmitted, To: ledger.StateCommitted}}}, ledger.ErrIllegalTransition},
		"no transcript": {ledger.Advance{RecordingID: r.ID, Steps: []ledger.Transition{
			{From: ledger.StateSubmitted, To: ledger.StateTranscribed}}}, ledger.ErrInvalid},
		"transcript without transcribed": {ledger.Advance{RecordingID: r.ID, Transcript: tr, Steps: []ledger.Transition{
			{From: ledger.StateSubmitted, To: ledger.StateFailed}}}, ledger.ErrInvalid},
		"retry-after": {ledger.Advance{RecordingID: r.ID, Steps: []ledger.Transition{
			{From: ledger.StateSubmitted, To: ledger.StateRetryWait, RetryAfter: &raw}}}, ledger.ErrInvalid},
		"stale": {ledger.Advance{RecordingID: r.ID, Steps: []ledger.Transition{
			{From: ledger.StateEligible, To: ledger.StateSubmitted}}}, ledger.ErrStateConflict},
		"no recording": {ledger.Advance{RecordingID: uuid.New(), Steps: []ledger.Transition{
			{From: ledger.StateEligible, To: ledger.StateSubmitted}}}, ledger.ErrNotFound},
	} {
		if _, err := b.advance(t, c.a); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	row, err := b.ledger.Recording(context.Background(), r.ID)
	if err != nil || row.Snapshot() != r.Snapshot() {
		t.Fatalf("row after refusals: %+v, %v; want %+v", row.Snapshot(), err, r.Snapshot())
	}
}

// With Go bypassed, the database checks a move of several steps at the end
// of its statement: events that do not lead from the old state to the new
// one a step at a time, or too few of them, are refused (CS001), as is a
// one-step move whose event is an edge from another state; so is a note
// naming no state, and a move whose events come in a later statement (the
// row is checked when its statement ends). A chain that does lead there
// commits.
func TestDatabaseChecksMultiStepMoves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	type ev struct{ prior, next string }
	move := func(id uuid.UUID, seq int, to string, jump int, evs []ev) error {
		raw := make([]rawEvent, len(evs))
		for i, e := range evs {
			raw[i] = rawEvent{prior: e.prior, next: e.next, attempt: 1}
		}
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return rawMove(ctx, tx, id, seq, to, jump, 0, raw) })
	}
	for name, c := range map[string]struct {
		jump int
		evs  []ev
		ok   bool
	}{
		"chain":          {3, []ev{{"submitted", "transcribed"}, {"transcribed", "validated"}, {"validated", "committed"}}, true},
		"broken link":    {3, []ev{{"submitted", "transcribed"}, {"validated", "committed"}, {"committed", "validated"}}, false},
		"wrong first":    {2, []ev{{"eligible", "submitted"}, {"submitted", "transcribed"}}, false},
		"too few events": {3, []ev{{"submitted", "transcribed"}, {"transcribed", "validated"}}, false},
		"wrong last":     {2, []ev{{"submitted", "transcribed"}, {"transcribed", "failed"}}, false},
		// An edge, but not from the state the row left (submitted).
		"one step, another edge": {1, []ev{{"transcribed", "failed"}}, false},
	} {
		r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
		last := c.evs[len(c.evs)-1].next
		if name == "wrong last" {
			last = "validated"
		}
		err := move(r.ID, r.EventSeq, last, c.jump, c.evs)
		if c.ok != (err == nil) || (!c.ok && sqlState(err) != "CS001") {
			t.Errorf("%s: err = %v (SQLSTATE %q), want ok=%v or CS001", name, err, sqlState(err), c.ok)
		}
	}
	// A one-step jump over an edge the machine lacks is refused at once.
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	if err := move(r.ID, r.EventSeq, "committed", 1, []ev{{"submitted", "committed"}}); sqlState(err) != "CS001" {
		t.Errorf("one-step illegal jump: %v, want CS001", err)
	}
	// A note must name a state.
	err := move(r.ID, r.EventSeq, "submitted", 1, []ev{{"bogus", "bogus"}})
	if sqlState(err) != "CS001" {
		t.Errorf("note naming no state: %v, want CS001", err)
	}
	// The events of a move in a later statement than the move: the move's
	// own statement is refused, its row left without its last event.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE recordings SET state = 'transcribed', last_event_seq = last_event_seq + 1
			WHERE id = $1`, r.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at)
			VALUES ($1, $2, 'submitted', 'transcribed', 1, now())`, r.ID, r.EventSeq+1)
		return err
	})
	if sqlState(err) != "CS001" || !strings.Contains(err.Error(), "without a matching event") {
		t.Errorf("events in a later statement than the move: %v, want CS001 without a matching event", err)
	}
}
