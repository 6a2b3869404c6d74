package serve

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
)

// serveAuthenticator checks serve's tokens against the database.
func serveAuthenticator(pool *pgxpool.Pool) func(ctx context.Context, bearer string) (string, bool, bool, error) {
	return Authenticator(auth.New(pool))
}

// TokenChecker says whom a bearer token speaks for: *auth.Store (the
// database, on every request) or *auth.Cache (memory first, for the
// capacity API).
type TokenChecker interface {
	Authenticate(ctx context.Context, bearer string) (auth.Principal, error)
}

// Authenticator checks bearer tokens through s (one store per process, so
// that its refusals are counted in one place; a cache counts them in its
// store's).
func Authenticator(s TokenChecker) func(ctx context.Context, bearer string) (string, bool, bool, error) {
	return func(ctx context.Context, bearer string) (string, bool, bool, error) {
		p, err := s.Authenticate(ctx, bearer)
		switch {
		case errors.Is(err, auth.ErrInvalid):
			return "", false, false, nil
		case err != nil:
			return "", false, false, err
		}
		return p.Tenant, p.Admin, true, nil
	}
}
