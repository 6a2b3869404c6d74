package outbox

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "CS001":
			return fmt.Errorf("%w: %s", ErrIllegalTransition, pgErr.Message)
		case "CS002":
			return fmt.Errorf("%w: %s", ErrAppendOnly, pgErr.Message)
		}
	}
	return err
}
