package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// Event is one appended entry of a recording's history. Events are never
// changed or removed, except by the retention purge of whole histories.
type Event struct {
	ID          int64     `json:"id"`
	RecordingID uuid.UUID `json:"recording_id"`
	// Seq numbers a recording's events 1, 2, 3, ... without gaps.
	Seq int `json:"seq"`
	// Prior is the state left; empty for the first event.
	Prior State `json:"prior_state"`
	New   State `json:"new_state"`
	// Attempt is the recording's attempt count after this event.
	Attempt       int       `json:"attempt"`
	At            time.Time `json:"at"`
	Reason        string    `json:"reason"`
	ResponseClass string    `json:"response_class"`
	// RetryAfter is the raw header of the answer that caused it, if any.
	RetryAfter *string        `json:"retry_after_raw"`
	Detail     map[string]any `json:"detail"`
}

// Events returns a recording's history, oldest first.
func (l *Ledger) Events(ctx context.Context, recordingID uuid.UUID) ([]Event, error) {
	rows, err := l.queries.RecordingEventList(ctx, l.pool, recordingID)
	if err != nil {
		return nil, fmt.Errorf("reading events of %s: %w", recordingID, translate(err))
	}
	evs := make([]Event, len(rows))
	for i, r := range rows {
		var detail map[string]any
		if err := json.Unmarshal(r.Detail, &detail); err != nil {
			return nil, fmt.Errorf("reading events of %s: detail of event %d: %w", recordingID, r.Seq, err)
		}
		evs[i] = Event{
			ID: r.ID, RecordingID: r.RecordingID, Seq: int(r.Seq), Prior: State(deref(r.PriorState)), New: State(r.NewState),
			Attempt: int(r.Attempt), At: r.At.UTC(), Reason: r.Reason, ResponseClass: r.ResponseClass,
			RetryAfter: r.RetryAfterRaw, Detail: detail,
		}
	}
	return evs, nil
}

// EventCount counts the events of every recording: the size of the ledger's
// append-only history.
func (l *Ledger) EventCount(ctx context.Context) (int64, error) {
	n, err := l.queries.RecordingEventCount(ctx, l.pool)
	if err != nil {
		return 0, fmt.Errorf("counting events: %w", translate(err))
	}
	return n, nil
}

// Validations counts how many times a recording entered validated from
// another state (a re-validation counts again); 0 for an unknown recording.
func (l *Ledger) Validations(ctx context.Context, recordingID uuid.UUID) (int, error) {
	return l.validations(ctx, l.pool, recordingID)
}

// ValidationsTx is Validations inside the caller's transaction.
func (l *Ledger) ValidationsTx(ctx context.Context, tx pgx.Tx, recordingID uuid.UUID) (int, error) {
	return l.validations(ctx, tx, recordingID)
}

func (l *Ledger) validations(ctx context.Context, db dbsqlc.DBTX, recordingID uuid.UUID) (int, error) {
	n, err := l.queries.RecordingEventCountValidations(ctx, db, recordingID)
	if err != nil {
		return 0, fmt.Errorf("counting validations of %s: %w", recordingID, translate(err))
	}
	return int(n), nil
}

// Snapshot is what a recording's history says its current row must be.
type Snapshot struct {
	State     State
	Attempt   int
	EventSeq  int
	UpdatedAt time.Time
}

// Snapshot returns the parts of r that its history determines.
func (r Recording) Snapshot() Snapshot {
	return Snapshot{State: r.State, Attempt: r.Attempt, EventSeq: r.EventSeq, UpdatedAt: r.UpdatedAt}
}

// Replay folds a recording's events, oldest first, into the snapshot they
// imply, checking that the chain is complete and legal: sequence numbers
// without gaps, a first event entering received, every later event leaving
// the state the one before entered along an allowed edge (or staying in it:
// a note), and attempts counted exactly on entering submitted and on
// resubmission notes in submitted.
func Replay(events []Event) (Snapshot, error) {
	var s Snapshot
	for i, e := range events {
		switch {
		case e.Seq != i+1:
			return s, fmt.Errorf("event %d has seq %d, want %d", i, e.Seq, i+1)
		case i == 0 && (e.Prior != "" || e.New != StateReceived):
			return s, fmt.Errorf("first event %q -> %q, want entry into %s", e.Prior, e.New, StateReceived)
		case i > 0 && e.Prior != s.State:
			return s, fmt.Errorf("event %d leaves %s but the recording was in %s", e.Seq, e.Prior, s.State)
		case i > 0 && e.Prior != e.New && !CanTransition(e.Prior, e.New):
			return s, fmt.Errorf("event %d: %w", e.Seq, &IllegalTransitionError{From: e.Prior, To: e.New})
		}
		want := s.Attempt
		if i > 0 && e.Prior != e.New && countsAttempt(e.New) {
			want++
		}
		resubmission := i > 0 && e.Prior == e.New && e.New == StateSubmitted && e.Attempt == s.Attempt+1
		if e.Attempt != want && !resubmission {
			return s, fmt.Errorf("event %d has attempt %d, want %d", e.Seq, e.Attempt, want)
		}
		s = Snapshot{State: e.New, Attempt: e.Attempt, EventSeq: e.Seq, UpdatedAt: e.At}
	}
	if len(events) == 0 {
		return s, fmt.Errorf("no events")
	}
	return s, nil
}
