package outbox

import (
	"errors"
	"fmt"

	"github.com/callscribe/callscribe/internal/pgerr"
)

var (
	// ErrNotFound: no outbox row (or action set) with that key.
	ErrNotFound = errors.New("outbox: not found")
	// ErrNotDead: Retry was asked for a row that is not dead.
	ErrNotDead = errors.New("outbox: only dead rows can be retried")
	// ErrIllegalTransition: the database refused a delivery-state change
	// (delivered and dead are final for the dispatcher).
	ErrIllegalTransition = errors.New("outbox: illegal transition")
	// ErrAppendOnly: the database refused to change or remove delivery
	// history or a committed action set.
	ErrAppendOnly = errors.New("outbox: history is append-only")
)

// translate turns driver errors into the outbox's own.
func translate(err error) error { return driverErrors.Translate(err) }

// driverErrors is the outbox's pgerr.Translator.
var driverErrors = pgerr.Translator{
	NotFound: ErrNotFound,
	IllegalTransition: func(message string) error {
		return fmt.Errorf("%w: %s", ErrIllegalTransition, message)
	},
	AppendOnly: ErrAppendOnly,
}
