package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// The roles callscribe's grants name (see roles/grants.sql).
const (
	// RuntimeRole is what workers, serve and the CLI's other commands act
	// as: SELECT and INSERT, UPDATE of the columns the state machines
	// move, never DELETE, TRUNCATE, ALTER or DROP.
	RuntimeRole = "callscribe_runtime"
	// PurgeRole owns the retention purge function; no login holds it.
	PurgeRole = "callscribe_purge"
)

//go:embed roles/*.sql
var roleFiles embed.FS

// RolesSQL returns the SQL that creates the roles (once per cluster) and
// grants their privileges (once per database, after every migration), for
// an administrator to run where `migrate up` cannot.
func RolesSQL() (create, grants string) {
	c, _ := roleFiles.ReadFile("roles/create.sql")
	g, _ := roleFiles.ReadFile("roles/grants.sql")
	return string(c), string(g)
}

// RolesResult says what EnsureRoles could do.
type RolesResult struct {
	// Created: the roles exist (made now or before).
	Created bool
	// Granted: the grants were applied and the purge function belongs to
	// PurgeRole.
	Granted bool
	// Why the roles or grants could not be applied (insufficient
	// privilege, typically on managed PostgreSQL); "" when they were.
	Why string
}

// EnsureRoles creates RuntimeRole and PurgeRole when the connected user
// may (CREATEROLE or superuser), then applies the grants. Without the
// privilege it changes nothing and says why: the database then works as
// before, as its owner, and an administrator runs RolesSQL.
func (m *Migrator) EnsureRoles(ctx context.Context) (RolesResult, error) {
	create, grants := RolesSQL()
	var res RolesResult
	if _, err := m.pool.Exec(ctx, create); err != nil {
		if !insufficientPrivilege(err) {
			return res, fmt.Errorf("creating the roles %s and %s: %w", RuntimeRole, PurgeRole, err)
		}
		res.Why = "cannot create roles: " + err.Error()
	}
	var n int
	if err := m.pool.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = ANY ($1)",
		[]string{RuntimeRole, PurgeRole}).Scan(&n); err != nil {
		return res, fmt.Errorf("looking for the roles %s and %s: %w", RuntimeRole, PurgeRole, err)
	}
	if n < 2 {
		if res.Why == "" {
			res.Why = "the roles do not exist"
		}
		return res, nil
	}
	res.Created = true
	if _, err := m.pool.Exec(ctx, grants); err != nil {
		if !insufficientPrivilege(err) {
			return res, fmt.Errorf("granting the privileges of %s and %s: %w", RuntimeRole, PurgeRole, err)
		}
		res.Why = "cannot grant: " + err.Error()
		return res, nil
	}
	res.Granted, res.Why = true, ""
	return res, nil
}

// insufficientPrivilege reports a PostgreSQL refusal for want of a
// privilege (42501) or of ownership/membership.
func insufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42501" || pgErr.Code == "0LP01")
}
