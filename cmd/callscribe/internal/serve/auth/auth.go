// Package auth holds the API tokens of `callscribe serve`. A token names
// a tenant (its organisation in the capacity API) or is an admin token. A
// token is "cs_<id>_<64 hex digits>": only the SHA-256 of the secret part
// is stored, and the token is shown once, when it is created. Tokens are
// revoked, never deleted.
//
// Store checks a token against the database on every call. Cache holds
// every token's hash in the process, revocations pushed by PostgreSQL
// NOTIFY and re-read periodically, so that the capacity API never waits on
// the database: while it is down, a token the cache holds keeps working.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth/internal/dbsqlc"
)

// Token is a stored token: never its secret.
type Token struct {
	ID int64 `json:"id"`
	// Name is a note for people ("dialer-eu-1").
	Name string `json:"name"`
	// Tenant the token reads and writes; "" for an admin token.
	Tenant    string     `json:"tenant,omitempty"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Principal is who a request's token speaks for.
type Principal struct {
	TokenID int64
	// Tenant: the one tenant (organisation) the token may act for; "" for
	// an admin.
	Tenant string
	Admin  bool
}

// May reports whether p may act for tenant (organisation) t.
func (p Principal) May(t string) bool { return p.Admin || p.Tenant == t }

// Errors.
var (
	// ErrInvalid: not a token, unknown, revoked, or the wrong secret. It
	// says no more, on purpose.
	ErrInvalid = errors.New("tokens: invalid token")
	// ErrNotFound: no token of that id.
	ErrNotFound = errors.New("tokens: no such token")
)

var (
	tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	tokenRE  = regexp.MustCompile(`^cs_([1-9][0-9]{0,18})_([0-9a-f]{64})$`)
)

// Store keeps tokens in PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	q        *dbsqlc.Queries
	now      func() time.Time
	failures atomic.Uint64
}

// New returns a Store on pool (migrated: table api_tokens).
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: dbsqlc.New(), now: time.Now}
}

// Create makes a token for tenant, or an admin token when admin is set (then
// tenant must be ""), and returns it with its secret: the only time the
// secret exists outside the caller.
func (s *Store) Create(ctx context.Context, tenant, name string, admin bool) (Token, string, error) {
	switch {
	case admin && tenant != "":
		return Token{}, "", errors.New("tokens: an admin token names no tenant")
	case !admin && !tenantRE.MatchString(tenant):
		return Token{}, "", fmt.Errorf("tokens: tenant %q: want 1-128 of A-Z a-z 0-9 . _ -", tenant)
	case len(name) > 128:
		return Token{}, "", errors.New("tokens: name: at most 128 bytes")
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return Token{}, "", fmt.Errorf("tokens: drawing a secret: %w", err)
	}
	hexSecret := hex.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(hexSecret))
	var t *string
	if !admin {
		t = &tenant
	}
	row, err := s.q.TokenInsert(ctx, s.pool, dbsqlc.TokenInsertParams{Name: name, TenantID: t, Admin: admin,
		SecretSha256: sum[:], CreatedAt: s.now().UTC()})
	if err != nil {
		return Token{}, "", fmt.Errorf("tokens: storing a token: %w", err)
	}
	tok := tokenOf(row)
	return tok, "cs_" + strconv.FormatInt(tok.ID, 10) + "_" + hexSecret, nil
}

// List returns every token, revoked ones too, oldest first.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	rows, err := s.q.TokenList(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("tokens: listing: %w", err)
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = tokenOf(r)
	}
	return out, nil
}

// Get returns token id (revoked or not), or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Token, error) {
	row, err := s.q.TokenGet(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("tokens: reading %d: %w", id, err)
	}
	return tokenOf(row), nil
}

// Revoke revokes token id at once: the next request with it that a Store
// checks is refused, and every Cache hears of it by notice (RevokedChannel).
// Revoking a revoked token changes nothing; an unknown id is ErrNotFound.
func (s *Store) Revoke(ctx context.Context, id int64) (Token, error) {
	row, err := s.q.TokenRevoke(ctx, s.pool, dbsqlc.TokenRevokeParams{ID: id, At: s.now().UTC()})
	if errors.Is(err, pgx.ErrNoRows) {
		row, err = s.q.TokenGet(ctx, s.pool, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return Token{}, ErrNotFound
		}
	}
	if err != nil {
		return Token{}, fmt.Errorf("tokens: revoking %d: %w", id, err)
	}
	return tokenOf(row), nil
}

// Authenticate returns whom bearer speaks for, or ErrInvalid (counted in
// Failures). The secret's hash is compared in constant time.
func (s *Store) Authenticate(ctx context.Context, bearer string) (Principal, error) {
	m := tokenRE.FindStringSubmatch(strings.TrimSpace(bearer))
	if m == nil {
		return s.fail()
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return s.fail()
	}
	row, err := s.q.TokenGet(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.fail()
	}
	if err != nil {
		return Principal{}, fmt.Errorf("tokens: looking up token %d: %w", id, err)
	}
	sum := sha256.Sum256([]byte(m[2]))
	if subtle.ConstantTimeCompare(sum[:], row.SecretSha256) != 1 || row.RevokedAt != nil {
		return s.fail()
	}
	p := Principal{TokenID: row.ID, Admin: row.Admin}
	if row.TenantID != nil {
		p.Tenant = *row.TenantID
	}
	return p, nil
}

// Failures counts the authentications refused since the Store was made.
func (s *Store) Failures() uint64 { return s.failures.Load() }

func (s *Store) fail() (Principal, error) {
	s.failures.Add(1)
	return Principal{}, ErrInvalid
}

func tokenOf(r dbsqlc.ApiToken) Token {
	t := Token{ID: r.ID, Name: r.Name, Admin: r.Admin, CreatedAt: r.CreatedAt.UTC(), RevokedAt: r.RevokedAt}
	if r.TenantID != nil {
		t.Tenant = *r.TenantID
	}
	return t
}
