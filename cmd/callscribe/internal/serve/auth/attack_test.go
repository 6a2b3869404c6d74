package auth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/testdb"
)

// The runtime role (serve, workers) must not mint tokens: an admin token
// it could write would open every tenant and the operator endpoints.
// Tokens are created by `callscribe tokens create`, as the owner.
func TestAttackRuntimeCannotMintTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	rt := testdb.AsRuntime(t, pool)
	_, err := rt.Exec(ctx, `INSERT INTO api_tokens (name, admin, secret_sha256, created_at)
		VALUES ('minted', true, sha256('x'::bytea), now())`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("as the runtime role, INSERT INTO api_tokens: err = %v, want 42501", err)
	}
	if _, _, err := auth.New(rt).Create(ctx, "", "ops", true); err == nil {
		t.Fatal("as the runtime role, auth.Store.Create succeeded")
	}
	// The owner still creates them.
	if _, _, err := auth.New(pool).Create(ctx, "", "ops", true); err != nil {
		t.Fatalf("as the owner, Create: %v", err)
	}
}
