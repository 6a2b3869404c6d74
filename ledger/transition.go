package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Transition moves one recording from one state to the next.
type Transition struct {
	RecordingID uuid.UUID
	// From is the state the caller read; the move happens only if the
	// recording is still in it (compare-and-set).
	From State
	To   State
	// Reason says why, for a person reading the history.
	Reason string
	// ResponseClass classifies the vendor's answer that caused the move
	// (for example "completed", "rate_limited", "permanent"); empty if none.
	ResponseClass string
	// RetryAfter is the raw Retry-After header of that answer, exactly as
	// received; nil when the answer had none.
	RetryAfter *string
	// Detail holds structured extras for the event (JSON object).
	Detail map[string]any
}

// Transition applies t in one short transaction of its own: a compare-and-set
// on (id, state) and one appended event. When another worker moved the
// recording first it returns a *StateConflictError (errors.Is
// ErrStateConflict) and writes nothing; an edge the state machine does not
// have returns an *IllegalTransitionError (errors.Is ErrIllegalTransition).
func (l *Ledger) Transition(ctx context.Context, t Transition) (Recording, error) {
	// One statement is one transaction: the update and its event commit
	// together, and no connection is held beyond it.
	return l.transition(ctx, l.pool, t)
}

// TransitionTx is Transition inside the caller's transaction, so the move
// commits or rolls back with the caller's other writes.
func (l *Ledger) TransitionTx(ctx context.Context, tx pgx.Tx, t Transition) (Recording, error) {
	return l.transition(ctx, tx, t)
}

func (l *Ledger) transition(ctx context.Context, db querier, t Transition) (Recording, error) {
	if !CanTransition(t.From, t.To) {
		return Recording{}, &IllegalTransitionError{From: t.From, To: t.To}
	}
	detail := t.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	inc := 0
	if countsAttempt(t.To) {
		inc = 1
	}
	rec, err := scanRecording(db.QueryRow(ctx, q("RecordingTransition"),
		t.RecordingID, string(t.From), string(t.To), inc, l.now(), t.Reason, t.ResponseClass, t.RetryAfter, detail))
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, ErrNotFound) {
		var ite *IllegalTransitionError
		if errors.As(err, &ite) {
			ite.From, ite.To = t.From, t.To
		}
		return Recording{}, fmt.Errorf("recording %s %s -> %s: %w", t.RecordingID, t.From, t.To, err)
	}
	// Nothing matched (id, from): find out why.
	var actual State
	if err := db.QueryRow(ctx, q("RecordingStateGet"), t.RecordingID).Scan(&actual); err != nil {
		if isNoRows(err) {
			return Recording{}, fmt.Errorf("recording %s: %w", t.RecordingID, ErrNotFound)
		}
		return Recording{}, fmt.Errorf("recording %s %s -> %s: reading state after a lost race: %w",
			t.RecordingID, t.From, t.To, translate(err))
	}
	return Recording{}, &StateConflictError{RecordingID: t.RecordingID, Expected: t.From, Actual: actual}
}
