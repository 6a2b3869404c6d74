package pgrole_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/pgrole"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/migrations"
)

// outsider is a login that is a member of no role.
const outsider = "callscribe_test_outsider"

// ApplyIfUsable on real logins: a member of the runtime role acts as it
// and is never told otherwise; asked for a role that does not exist, or
// logged in as a user that is no member of it, every connection acts as
// the login user and reports it, once per connection opened.
func TestApplyIfUsable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	testdb.AsRuntime(t, pool) // makes its login, a member of the runtime role
	if _, err := pool.Exec(ctx, `DO $$ BEGIN CREATE ROLE `+outsider+` LOGIN;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, login, role, want string
		unusable                bool
	}{
		{"a member", testdb.RuntimeLogin, migrations.RuntimeRole, migrations.RuntimeRole, false},
		{"a role that does not exist", testdb.RuntimeLogin, "callscribe_no_such_role", testdb.RuntimeLogin, true},
		{"a login that is no member", outsider, migrations.RuntimeRole, outsider, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(testdb.URLOf(t, pool))
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.User, cfg.ConnConfig.Password = c.login, ""
			cfg.MinConns, cfg.MaxConns = 2, 2
			var told atomic.Int64
			pgrole.ApplyIfUsable(cfg, c.role, func() { told.Add(1) })
			p, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			// Two connections at once, each opened through the hook.
			conns := make([]*pgxpool.Conn, 2)
			for i := range conns {
				if conns[i], err = p.Acquire(ctx); err != nil {
					t.Fatal(err)
				}
				var current, session string
				if err := conns[i].QueryRow(ctx, "SELECT current_user, session_user").Scan(&current, &session); err != nil {
					t.Fatal(err)
				}
				if current != c.want || session != c.login {
					t.Errorf("connection %d acts as %s (logged in as %s), want %s (as %s)", i, current, session, c.want, c.login)
				}
			}
			for _, conn := range conns {
				conn.Release()
			}
			if want := map[bool]int64{false: 0, true: 2}[c.unusable]; told.Load() != want {
				t.Errorf("told %d times the role was not usable, want %d (once per connection)", told.Load(), want)
			}
		})
	}
}
