package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/testdb"
)

func TestCreateAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	// Created as the owner, as `callscribe tokens create` does; read,
	// authenticated and revoked as the runtime role, as serve and the
	// other token commands act.
	owner := auth.New(pool)
	s := auth.New(testdb.AsRuntime(t, pool))

	acme, secret, err := owner.Create(ctx, "acme", "dialer-1", false)
	if err != nil {
		t.Fatal(err)
	}
	if acme.Tenant != "acme" || acme.Admin || !strings.HasPrefix(secret, "cs_") {
		t.Fatalf("created %+v, %q", acme, secret)
	}
	admin, adminSecret, err := owner.Create(ctx, "", "ops", true)
	if err != nil || !admin.Admin {
		t.Fatalf("admin token: %+v, %v", admin, err)
	}
	if p, err := s.Authenticate(ctx, secret); err != nil || p.Tenant != "acme" || p.Admin || !p.May("acme") || p.May("rival") {
		t.Fatalf("authenticate acme: %+v, %v", p, err)
	}
	if p, err := s.Authenticate(ctx, adminSecret); err != nil || !p.Admin || !p.May("rival") {
		t.Fatalf("authenticate admin: %+v, %v", p, err)
	}
	// Only the hash is stored.
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM api_tokens WHERE position($1::bytea in secret_sha256) > 0",
		[]byte(secret[len(secret)-64:])).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the secret is stored in clear: %d (%v)", stored, err)
	}

	wrong := secret[:len(secret)-1] + map[bool]string{true: "0", false: "1"}[secret[len(secret)-1] != '0']
	for _, bad := range []string{"", "cs_", "nonsense", wrong, "cs_999999_" + strings.Repeat("a", 64), strings.ToUpper(secret)} {
		if _, err := s.Authenticate(ctx, bad); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("authenticate %q: %v, want ErrInvalid", bad, err)
		}
	}
	if got := s.Failures(); got != 6 {
		t.Errorf("failures = %d, want 6", got)
	}

	if r, err := s.Revoke(ctx, acme.ID); err != nil || r.RevokedAt == nil {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	if _, err := s.Authenticate(ctx, secret); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("revoked token authenticated: %v", err)
	}
	if _, err := s.Revoke(ctx, 424242); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].RevokedAt == nil || list[1].RevokedAt != nil {
		t.Fatalf("list = %+v, %v", list, err)
	}

	for _, bad := range []struct {
		tenant string
		admin  bool
	}{{"", false}, {"x}:camp:y", false}, {strings.Repeat("a", 129), false}, {"acme", true}} {
		if _, _, err := owner.Create(ctx, bad.tenant, "", bad.admin); err == nil {
			t.Errorf("create tenant %q admin %v: accepted", bad.tenant, bad.admin)
		}
	}

	// A token is only ever revoked: not deleted, not changed, not revived.
	for _, stmt := range []string{"DELETE FROM api_tokens", "UPDATE api_tokens SET tenant_id = 'rival'",
		"UPDATE api_tokens SET revoked_at = NULL", "TRUNCATE api_tokens"} {
		_, err := pool.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "CS002" {
			t.Errorf("%s as the owner: %v, want CS002", stmt, err)
		}
	}
}

// Get reads a token by id, revoked or not, never its secret.
func TestGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	s := auth.New(testdb.AsRuntime(t, pool))
	admin, _, err := auth.New(pool).Create(ctx, "", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, admin.ID)
	if err != nil || got.ID != admin.ID || !got.Admin || got.Name != "ops" || got.RevokedAt != nil {
		t.Fatalf("get %d: %+v, %v; want %+v", admin.ID, got, err, admin)
	}
	if _, err := s.Revoke(ctx, admin.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, admin.ID); err != nil || got.RevokedAt == nil {
		t.Fatalf("get revoked %d: %+v, %v; want it revoked", admin.ID, got, err)
	}
	if _, err := s.Get(ctx, admin.ID+1000); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("get unknown: %v, want ErrNotFound", err)
	}
}
