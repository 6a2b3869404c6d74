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
)

// Usable reports whether role exists and the user that logged in on conn
// may act as it (is a member of it).
func Usable(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, role string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)
		THEN pg_has_role(session_user, $1, 'MEMBER') ELSE false END`, role).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("looking for the role %s: %w", role, err)
	}
	return ok, nil
}

// Apply makes every connection cfg opens act as role (SET ROLE), after
// any AfterConnect hook cfg already has.
func Apply(cfg *pgxpool.Config, role string) {
	prev := cfg.AfterConnect
	stmt := "SET ROLE " + pgx.Identifier{role}.Sanitize()
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if prev != nil {
			if err := prev(ctx, c); err != nil {
				return err
			}
		}
		if _, err := c.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("acting as the role %s: %w", role, err)
		}
		return nil
	}
}
