package ledger

import (
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/internal/pgerr"
)

var (
	// ErrNotFound: no recording (or scope) with that key.
	ErrNotFound = errors.New("ledger: not found")
	// ErrIllegalTransition: the state machine has no such edge. Returned by
	// the Go check and, should a caller bypass it, by the database.
	ErrIllegalTransition = errors.New("ledger: illegal transition")
	// ErrStateConflict: the compare-and-set lost: the recording was not in
	// the expected state (another worker moved it first).
	ErrStateConflict = errors.New("ledger: state conflict")
	// ErrAppendOnly: the database refused to change or remove audit history.
	ErrAppendOnly = errors.New("ledger: audit history is append-only")
	// ErrInvalid: a caller's value was refused before reaching the database.
	ErrInvalid = errors.New("ledger: invalid input")
)

// IllegalTransitionError says which edge was refused.
type IllegalTransitionError struct {
	From, To State
	// ByDatabase is true when the database trigger refused it.
	ByDatabase bool
	Detail     string
}

func (e *IllegalTransitionError) Error() string {
	by := ""
	if e.ByDatabase {
		by = " (refused by the database: " + e.Detail + ")"
	}
	return fmt.Sprintf("ledger: illegal transition %s -> %s%s", e.From, e.To, by)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *IllegalTransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// StateConflictError is a lost compare-and-set: the caller expected the
// recording in Expected, but it was in Actual.
type StateConflictError struct {
	RecordingID uuid.UUID
	Expected    State
	Actual      State
}

func (e *StateConflictError) Error() string {
	return fmt.Sprintf("ledger: recording %s is in state %s, not %s: another worker moved it first",
		e.RecordingID, e.Actual, e.Expected)
}

// Is makes errors.Is(err, ErrStateConflict) true.
func (e *StateConflictError) Is(target error) bool { return target == ErrStateConflict }

// InvalidError names the field a caller got wrong.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("ledger: %s: %s", e.Field, e.Reason) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// translate turns driver errors into the ledger's own.
func translate(err error) error { return driverErrors.Translate(err) }

// driverErrors is the ledger's pgerr.Translator: a database refusal of an
// edge is an *IllegalTransitionError saying so.
var driverErrors = pgerr.Translator{
	NotFound: ErrNotFound,
	IllegalTransition: func(message string) error {
		return &IllegalTransitionError{ByDatabase: true, Detail: message}
	},
	AppendOnly: ErrAppendOnly,
}
