package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// Advance is a move of one recording through one or more consecutive
// transitions in one statement: the row is updated once, from the first
// step's From to the last step's To, and one event is appended per step.
// A transcript received, validated and committed in one transaction costs
// one row update this way, not three.
type Advance struct {
	RecordingID uuid.UUID
	// Steps are the transitions, in order: each From is the previous
	// step's To, and each is an edge of the state machine. Their
	// RecordingID is ignored. A step may carry Reason, ResponseClass,
	// Detail and ProviderID (the last non-nil one is stored); RetryAfter,
	// Provider, NotBefore and Deadline belong to single transitions
	// (Transition) and are refused here. The row's not_before is cleared,
	// as any transition without one clears it.
	Steps []Transition
	// Transcript is stored with the move; required exactly when a step
	// enters transcribed (a recording is transcribed exactly when its
	// transcript exists).
	Transcript *Transcript
}

// AdvanceTx applies a inside the caller's transaction, with the same
// compare-and-set as a transition: when the recording is no longer in the
// first step's From it returns a *StateConflictError and writes nothing.
// The database checks, at the end of the statement, that the events
// appended lead from the old state to the new one a step at a time
// (recording_update_guard, migration 00022).
func (l *Ledger) AdvanceTx(ctx context.Context, tx pgx.Tx, a Advance) (Recording, error) {
	p, err := l.advanceParams(a)
	if err != nil {
		return Recording{}, err
	}
	rec, err := l.queries.RecordingAdvance(ctx, tx, p)
	return l.advanceResult(ctx, tx, a, rec, err)
}

// QueueAdvance is AdvanceTx as a queued step's statement (Committer.
// CommitQueued): it queues a's move on q and returns the function that,
// once the batch's results are read, says what it did: the moved
// recording, a *StateConflictError (the compare-and-set lost; reading
// why costs one more statement), or why the move was refused before or
// by the database.
func (l *Ledger) QueueAdvance(q *Queue, a Advance) func(ctx context.Context, tx pgx.Tx, batchErr error) (Recording, error) {
	p, err := l.advanceParams(a)
	if err != nil {
		return func(context.Context, pgx.Tx, error) (Recording, error) { return Recording{}, err }
	}
	var row dbsqlc.RecordingAdvanceRow
	var qerr error
	// Merged with the round's other moves of transcripts: one statement.
	QueueMerged(q, advanceMergeKey{}, p.ID, p, func(r dbsqlc.RecordingAdvanceRow, err error) { row, qerr = r, err },
		dbsqlc.QueueRecordingAdvance, dbsqlc.QueueRecordingAdvanceMany)
	return func(ctx context.Context, tx pgx.Tx, batchErr error) (Recording, error) {
		if qerr == nil && batchErr != nil {
			qerr = batchErr // the statement's answer never came
		}
		return l.advanceResult(ctx, tx, a, row, qerr)
	}
}

type advanceMergeKey struct{}

// advanceResult is what a's statement answered (rec, err) as AdvanceTx
// returns it.
func (l *Ledger) advanceResult(ctx context.Context, tx pgx.Tx, a Advance, rec dbsqlc.RecordingAdvanceRow, err error) (Recording, error) {
	if err == nil {
		return recordingFrom(dbsqlc.Recording(rec)), nil
	}
	first, last := a.Steps[0], a.Steps[len(a.Steps)-1]
	if err = translate(err); !errors.Is(err, ErrNotFound) {
		return Recording{}, fmt.Errorf("recording %s %s -> %s: %w", a.RecordingID, first.From, last.To, err)
	}
	return Recording{}, l.conflict(ctx, tx, Transition{RecordingID: a.RecordingID, From: first.From, To: last.To})
}

// advanceParams checks a and builds its statement's arguments.
func (l *Ledger) advanceParams(a Advance) (dbsqlc.RecordingAdvanceParams, error) {
	n := len(a.Steps)
	if n == 0 {
		return dbsqlc.RecordingAdvanceParams{}, &InvalidError{Field: "Advance.Steps", Reason: "no step"}
	}
	p := dbsqlc.RecordingAdvanceParams{
		ID: a.RecordingID, FromState: string(a.Steps[0].From), ToState: string(a.Steps[n-1].To), At: l.now(),
		SeqBacks: make([]int32, n), AttemptBacks: make([]int32, n), PriorStates: make([]string, n), NewStates: make([]string, n),
		Reasons: make([]string, n), ResponseClasses: make([]string, n), Details: make([][]byte, n),
	}
	entersTranscribed := false
	attempts := make([]int32, n)
	for i, st := range a.Steps {
		if i > 0 && st.From != a.Steps[i-1].To {
			return p, &InvalidError{Field: "Advance.Steps", Reason: fmt.Sprintf("step %d leaves %s, not %s where step %d ended", i+1, st.From, a.Steps[i-1].To, i)}
		}
		if !CanTransition(st.From, st.To) {
			return p, &IllegalTransitionError{From: st.From, To: st.To}
		}
		if st.RetryAfter != nil || st.Provider != nil || st.NotBefore != nil || st.Deadline != nil {
			return p, &InvalidError{Field: "Advance.Steps", Reason: fmt.Sprintf("step %d (%s -> %s) sets RetryAfter, Provider, NotBefore or Deadline: a single Transition does", i+1, st.From, st.To)}
		}
		detail, err := detailJSON(st.Detail)
		if err != nil {
			return p, fmt.Errorf("recording %s %s -> %s: %w", a.RecordingID, st.From, st.To, err)
		}
		if countsAttempt(st.To) {
			attempts[i] = 1
			p.AttemptInc++
		}
		if st.ProviderID != nil {
			p.ProviderID = st.ProviderID
		}
		entersTranscribed = entersTranscribed || st.To == StateTranscribed
		p.SeqBacks[i] = int32(n - 1 - i)
		p.PriorStates[i], p.NewStates[i] = string(st.From), string(st.To)
		p.Reasons[i], p.ResponseClasses[i], p.Details[i] = st.Reason, st.ResponseClass, detail
	}
	// An event's attempt is the row's after its step: the row's final
	// attempt less what the later steps count.
	var later int32
	for i := n - 1; i >= 0; i-- {
		p.AttemptBacks[i] = later
		later += attempts[i]
	}
	switch {
	case entersTranscribed && a.Transcript == nil:
		return p, &InvalidError{Field: "Advance.Transcript", Reason: fmt.Sprintf("a move into %s stores its transcript", StateTranscribed)}
	case !entersTranscribed && a.Transcript != nil:
		return p, &InvalidError{Field: "Advance.Transcript", Reason: fmt.Sprintf("a transcript goes with a move into %s", StateTranscribed)}
	case a.Transcript != nil:
		tr := a.Transcript
		segs := tr.Segments
		if segs == nil {
			segs = []Segment{}
		}
		raw, err := json.Marshal(segs)
		if err != nil {
			return p, fmt.Errorf("storing transcript of %s: %w", a.RecordingID, err)
		}
		p.WithTranscript, p.TrProvider, p.TrVendorID, p.TrText, p.TrLanguage = true, tr.Provider, tr.ProviderID, tr.Text, tr.Language
		p.TrConfidence, p.TrDurationSeconds, p.TrSegments = tr.Confidence, tr.DurationSeconds, raw
	default:
		p.TrSegments = []byte("[]")
	}
	return p, nil
}
