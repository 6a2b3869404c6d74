package pgerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/callscribe/callscribe/internal/pgerr"
)

var (
	errNotFound   = errors.New("not found")
	errIllegal    = errors.New("illegal")
	errAppendOnly = errors.New("append-only")
)

var tr = pgerr.Translator{
	NotFound:          errNotFound,
	IllegalTransition: func(m string) error { return fmt.Errorf("%w: %s", errIllegal, m) },
	AppendOnly:        errAppendOnly,
}

func TestTranslate(t *testing.T) {
	other := &pgconn.PgError{Code: "23505", Message: "duplicate key"}
	for _, c := range []struct {
		name string
		in   error
		is   error
		text string
	}{
		{"no rows", fmt.Errorf("reading: %w", pgx.ErrNoRows), errNotFound, "not found"},
		{"illegal", &pgconn.PgError{Code: pgerr.CodeIllegalTransition, Message: "no edge a -> b"}, errIllegal, "illegal: no edge a -> b"},
		{"append-only", fmt.Errorf("updating: %w", &pgconn.PgError{Code: pgerr.CodeAppendOnly, Message: "events are append-only"}),
			errAppendOnly, "append-only: events are append-only"},
		{"another SQLSTATE", other, other, other.Error()},
	} {
		got := tr.Translate(c.in)
		if !errors.Is(got, c.is) || got.Error() != c.text {
			t.Errorf("%s: %v, want %q (errors.Is %v)", c.name, got, c.text, c.is)
		}
	}
	if got := tr.Translate(nil); got != nil {
		t.Errorf("nil: %v", got)
	}
}
