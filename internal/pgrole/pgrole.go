// Package pgrole makes a connection pool act as a PostgreSQL role: every
// connection runs SET ROLE when it opens, so the session has that role's
// privileges only (callscribe's runtime role: no DELETE, TRUNCATE, ALTER
// or DROP of its tables).
package pgrole

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/pgsession"
)

// Usable reports whether role exists and the user that logged in on conn
// may act as it (is a member of it).
func Usable(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, role string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT `+usableCase(`true`, `false`), role).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("looking for the role %s: %w", role, err)
	}
	return ok, nil
}

// Apply makes every connection cfg opens act as role (SET ROLE), after
// any AfterConnect hook cfg already has.
func Apply(cfg *pgxpool.Config, role string) {
	stmt := "SET ROLE " + pgx.Identifier{role}.Sanitize()
	pgsession.AfterConnect(cfg, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("acting as the role %s: %w", role, err)
		}
		return nil
	})
}

// usableCase is an SQL expression on the role named $1: then when it
// exists and session_user is a member of it, otherwise otherwise. The
// nested CASE keeps pg_has_role from a role that does not exist (an
// error).
func usableCase(then, otherwise string) string {
	return `CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)
		THEN CASE WHEN pg_has_role(session_user, $1, 'MEMBER') THEN ` + then + ` ELSE ` + otherwise + ` END
		ELSE ` + otherwise + ` END`
}

// ApplyIfUsable makes every connection cfg opens act as role when the
// user that logged in may (role exists and the user is a member of it),
// and as that user otherwise, calling unusable (nil: nothing) each time a
// connection could not take the role. It asks and sets in one simple
// query, a round trip on the connection being opened, instead of Usable
// on a connection of its own and Apply. It runs after any AfterConnect
// hook cfg already has.
func ApplyIfUsable(cfg *pgxpool.Config, role string, unusable func()) {
	pgsession.AfterConnect(cfg, func(ctx context.Context, c *pgx.Conn) error {
		// set_config('role', …, false) is SET ROLE.
		var set *string
		if err := c.QueryRow(ctx, `SELECT `+usableCase(`set_config('role', $1, false)`, `NULL`),
			pgx.QueryExecModeSimpleProtocol, role).Scan(&set); err != nil {
			return fmt.Errorf("acting as the role %s: %w", role, err)
		}
		if set == nil && unusable != nil {
			unusable()
		}
		return nil
	})
}
