package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
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

	// Row updates made with the move (nil: unchanged).
	Provider   *string
	ProviderID *string
	// NotBefore: when a recording entering retry_wait may be tried again.
	// Every transition sets it: nil clears it.
	NotBefore *time.Time
	// Deadline replaces the recording's deadline (an operator re-drive).
	Deadline *time.Time
}

// Transition applies t in one short transaction of its own: a compare-and-set
// on (id, state) and one appended event. When another worker moved the
// recording first it returns a *StateConflictError (errors.Is
// ErrStateConflict) and writes nothing; an edge the state machine does not
// have returns an *IllegalTransitionError (errors.Is ErrIllegalTransition).
//
// With group commit on (Config.Commit), the transaction is shared with
// other steps of this process (Ledger.Commit); Transition returns once it
// has committed.
func (l *Ledger) Transition(ctx context.Context, t Transition) (Recording, error) {
	if !l.commit.Grouping() {
		// One statement is one transaction: the update and its event
		// commit together, and no connection is held beyond it.
		return l.transition(ctx, l.pool, t)
	}
	// One statement: queued with the group's other one-statement steps,
	// all sent in one round trip.
	p, err := l.transitionParams(t)
	if err != nil {
		return Recording{}, err
	}
	var rec Recording
	err = l.commit.CommitQueued(ctx, func(q *Queue) FinishFunc {
		var row dbsqlc.RecordingTransitionRow
		var qerr error
		queueTransition(q, p, func(r dbsqlc.RecordingTransitionRow, err error) { row, qerr = r, err })
		return func(ctx context.Context, tx pgx.Tx, batchErr error) error {
			if qerr == nil && batchErr != nil {
				qerr = batchErr // the statement's answer never came
			}
			var err error
			rec, err = l.transitionResult(ctx, tx, t, row, qerr)
			return KeptUsable(tx, err)
		}
	}, nil)
	if err != nil {
		return Recording{}, err // rec is the step's until it returned nil (see Commit)
	}
	return rec, nil
}

// queueTransition queues p's move on q, merged with the round's other
// moves into one RecordingTransitionMany (QueueMerged: one statement,
// its statement guard run once). fn gets the move's answer.
func queueTransition(q *Queue, p dbsqlc.RecordingTransitionParams, fn func(dbsqlc.RecordingTransitionRow, error)) {
	QueueMerged(q, transitionMergeKey{}, p.ID, p, fn, dbsqlc.QueueRecordingTransition, dbsqlc.QueueRecordingTransitionMany)
}

type transitionMergeKey struct{}

// KeptUsable marks err, the error of a one-statement step in tx, as one
// that wrote nothing when the transaction is still usable: the statement
// succeeded and matched no row (a compare-and-set that lost), or the step
// refused before sending it. A statement the database refused leaves the
// transaction failed, and the step's group is written again alone.
func KeptUsable(tx pgx.Tx, err error) error {
	if err == nil || tx.Conn().PgConn().TxStatus() != 'T' {
		return err
	}
	return WroteNothing(err)
}

// TransitionTx is Transition inside the caller's transaction, so the move
// commits or rolls back with the caller's other writes.
func (l *Ledger) TransitionTx(ctx context.Context, tx pgx.Tx, t Transition) (Recording, error) {
	return l.transition(ctx, tx, t)
}

func (l *Ledger) transition(ctx context.Context, db dbsqlc.DBTX, t Transition) (Recording, error) {
	p, err := l.transitionParams(t)
	if err != nil {
		return Recording{}, err
	}
	rec, err := l.queries.RecordingTransition(ctx, db, p)
	return l.transitionResult(ctx, db, t, rec, err)
}

// transitionParams is t's statement, or why t is refused before it is
// sent.
func (l *Ledger) transitionParams(t Transition) (dbsqlc.RecordingTransitionParams, error) {
	if !CanTransition(t.From, t.To) {
		return dbsqlc.RecordingTransitionParams{}, &IllegalTransitionError{From: t.From, To: t.To}
	}
	detail, err := detailJSON(t.Detail)
	if err != nil {
		return dbsqlc.RecordingTransitionParams{}, fmt.Errorf("recording %s %s -> %s: %w", t.RecordingID, t.From, t.To, err)
	}
	var inc int32
	if countsAttempt(t.To) {
		inc = 1
	}
	return dbsqlc.RecordingTransitionParams{
		ID: t.RecordingID, FromState: string(t.From), ToState: string(t.To), AttemptInc: inc, At: l.now(),
		Reason: t.Reason, ResponseClass: t.ResponseClass, RetryAfterRaw: t.RetryAfter, Detail: detail,
		Provider: t.Provider, ProviderID: t.ProviderID, NotBefore: pgtime.WritePtrOrNull(t.NotBefore), Deadline: pgtime.WritePtrOrNull(t.Deadline),
	}, nil
}

// transitionResult is what t's statement answered (rec, err) as
// Transition returns it: the moved recording, or why it did not move.
func (l *Ledger) transitionResult(ctx context.Context, db dbsqlc.DBTX, t Transition, rec dbsqlc.RecordingTransitionRow, err error) (Recording, error) {
	if err == nil {
		return recordingFrom(dbsqlc.Recording(rec)), nil
	}
	if err = translate(err); !errors.Is(err, ErrNotFound) {
		var ite *IllegalTransitionError
		if errors.As(err, &ite) {
			ite.From, ite.To = t.From, t.To
		}
		return Recording{}, fmt.Errorf("recording %s %s -> %s: %w", t.RecordingID, t.From, t.To, err)
	}
	return Recording{}, l.conflict(ctx, db, t)
}

// conflict explains a compare-and-set of t that matched no row: the
// recording is in another state (*StateConflictError) or does not exist.
func (l *Ledger) conflict(ctx context.Context, db dbsqlc.DBTX, t Transition) error {
	actual, err := l.queries.RecordingStateGet(ctx, db, t.RecordingID)
	if err != nil {
		if err = translate(err); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("recording %s: %w", t.RecordingID, ErrNotFound)
		}
		return fmt.Errorf("recording %s %s -> %s: reading state after a lost race: %w",
			t.RecordingID, t.From, t.To, err)
	}
	return &StateConflictError{RecordingID: t.RecordingID, Expected: t.From, Actual: State(actual)}
}

// detailJSON is an event's detail as stored: a JSON object, {} when nil.
func detailJSON(detail map[string]any) ([]byte, error) {
	if detail == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return nil, &InvalidError{Field: "Detail", Reason: err.Error()}
	}
	return b, nil
}

// Note records something that happened to a recording without moving it:
// a vendor's interim answer, a poll, a resubmission. It is an event whose
// prior and new state are the recording's current state, appended with the
// same compare-and-set as a transition.
type Note struct {
	RecordingID uuid.UUID
	// State the caller read; the note is written only if it still holds.
	State         State
	Reason        string
	ResponseClass string
	RetryAfter    *string
	Detail        map[string]any
	// Submission: this note records another submission to the vendor
	// (a resubmission in state submitted): the attempt count goes up.
	Submission bool
	Provider   *string
	ProviderID *string
}

// Note appends n in one short transaction of its own.
// With group commit on, it shares a group transaction as Transition does.
func (l *Ledger) Note(ctx context.Context, n Note) (Recording, error) {
	if !l.commit.Grouping() {
		return l.note(ctx, l.pool, n)
	}
	var rec Recording
	err := l.Commit(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		rec, err = l.note(ctx, tx, n)
		return KeptUsable(tx, err)
	})
	if err != nil {
		return Recording{}, err // rec is the step's until it returned nil (see Commit)
	}
	return rec, nil
}

// NoteTx is Note inside the caller's transaction.
func (l *Ledger) NoteTx(ctx context.Context, tx pgx.Tx, n Note) (Recording, error) {
	return l.note(ctx, tx, n)
}

func (l *Ledger) note(ctx context.Context, db dbsqlc.DBTX, n Note) (Recording, error) {
	if n.Submission && n.State != StateSubmitted {
		return Recording{}, &InvalidError{Field: "Submission", Reason: "only a recording in submitted can be resubmitted"}
	}
	detail, err := detailJSON(n.Detail)
	if err != nil {
		return Recording{}, fmt.Errorf("recording %s note in %s: %w", n.RecordingID, n.State, err)
	}
	var inc int32
	if n.Submission {
		inc = 1
	}
	rec, err := l.queries.RecordingNote(ctx, db, dbsqlc.RecordingNoteParams{
		ID: n.RecordingID, State: string(n.State), AttemptInc: inc, At: l.now(),
		Reason: n.Reason, ResponseClass: n.ResponseClass, RetryAfterRaw: n.RetryAfter, Detail: detail,
		Provider: n.Provider, ProviderID: n.ProviderID,
	})
	if err == nil {
		return recordingFrom(dbsqlc.Recording(rec)), nil
	}
	if err = translate(err); !errors.Is(err, ErrNotFound) {
		return Recording{}, fmt.Errorf("recording %s note in %s: %w", n.RecordingID, n.State, err)
	}
	actual, err := l.queries.RecordingStateGet(ctx, db, n.RecordingID)
	if err != nil {
		if err = translate(err); errors.Is(err, ErrNotFound) {
			return Recording{}, fmt.Errorf("recording %s: %w", n.RecordingID, ErrNotFound)
		}
		return Recording{}, fmt.Errorf("recording %s note: reading state after a lost race: %w", n.RecordingID, err)
	}
	return Recording{}, &StateConflictError{RecordingID: n.RecordingID, Expected: n.State, Actual: State(actual)}
}
