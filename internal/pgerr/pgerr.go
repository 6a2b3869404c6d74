// Package pgerr turns the driver's errors into a package's own: no row
// becomes its not-found error, and the SQLSTATEs callscribe's triggers
// raise become its illegal-transition and append-only errors. The ledger
// and the outbox share it; each keeps its exported errors.
package pgerr

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs of callscribe's triggers (migrations).
const (
	// CodeIllegalTransition: a state machine has no such edge.
	CodeIllegalTransition = "CS001"
	// CodeAppendOnly: history may not be changed or removed.
	CodeAppendOnly = "CS002"
)

// Translator is one package's errors for what the driver reports.
type Translator struct {
	// NotFound stands for pgx.ErrNoRows.
	NotFound error
	// IllegalTransition is the error for CodeIllegalTransition, given the
	// database's message.
	IllegalTransition func(message string) error
	// AppendOnly is wrapped, with the database's message, for
	// CodeAppendOnly.
	AppendOnly error
}

// Translate is err in t's terms; any other error (and nil) is returned as
// it is.
func (t Translator) Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return t.NotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case CodeIllegalTransition:
			return t.IllegalTransition(pgErr.Message)
		case CodeAppendOnly:
			return fmt.Errorf("%w: %s", t.AppendOnly, pgErr.Message)
		}
	}
	return err
}
