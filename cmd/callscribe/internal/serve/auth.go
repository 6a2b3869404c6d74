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

// Authenticator checks bearer tokens against s (one store per process, so
// that its refusals are counted in one place).
func Authenticator(s *auth.Store) func(ctx context.Context, bearer string) (string, bool, bool, error) {
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
