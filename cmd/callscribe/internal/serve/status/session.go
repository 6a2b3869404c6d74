package status

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/callscribe/callscribe/clock"
)

// Session defaults.
const (
	// SessionTTLDefault is how long a sign-in lasts.
	SessionTTLDefault = 12 * time.Hour
	// SessionCookie is the cookie's name.
	SessionCookie = "callscribe_status"
	// sessionIDBytes: the random bytes of a session id (43 characters of
	// unpadded base64url in the cookie).
	sessionIDBytes = 32
)

// SecureCookies says when the session cookie is marked Secure (sent back
// by the browser over HTTPS only).
type SecureCookies string

const (
	// SecureAuto: when the request reached this process over TLS. Headers
	// such as X-Forwarded-Proto are not trusted: behind a proxy that ends
	// TLS, use SecureAlways.
	SecureAuto SecureCookies = "auto"
	// SecureAlways: always; the page's own origin is then https.
	SecureAlways SecureCookies = "always"
	// SecureNever: never (plain HTTP beyond the loopback address only for
	// trials).
	SecureNever SecureCookies = "never"
)

// ParseSecureCookies returns the setting named s ("" is SecureAuto).
func ParseSecureCookies(s string) (SecureCookies, error) {
	switch v := SecureCookies(s); v {
	case "":
		return SecureAuto, nil
	case SecureAuto, SecureAlways, SecureNever:
		return v, nil
	}
	return "", fmt.Errorf("%q is not one of auto, always, never", s)
}

// DB is what Sessions needs of PostgreSQL: a *pgxpool.Pool on a migrated
// database (table statuspage_sessions), acting as the runtime role.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Sessions keeps the sessions of browsers signed in at LoginPath, in
// PostgreSQL, so that every serve process behind a load balancer knows
// them and a sign-out ends a session everywhere. The cookie holds a
// random session id (32 bytes), never the token; the table holds the id's
// SHA-256, the admin token's id and when the session expires. Signing out
// deletes the row: a copy of the cookie is refused from then on. Expired
// rows are deleted (by the database's clock) at every sign-in, so the
// table holds at most the sessions started within one TTL.
type Sessions struct {
	db    DB
	ttl   time.Duration
	clock clock.Clock
}

// NewSessions returns Sessions kept in db. ttl 0: SessionTTLDefault; c
// nil: the real clock (it sets and checks the expiry; the database's
// clock decides when an expired row is deleted).
func NewSessions(db DB, ttl time.Duration, c clock.Clock) (*Sessions, error) {
	if db == nil {
		return nil, errors.New("statuspage: NewSessions needs a database")
	}
	if ttl <= 0 {
		ttl = SessionTTLDefault
	}
	if c == nil {
		c = clock.System{}
	}
	return &Sessions{db: db, ttl: ttl, clock: c}, nil
}

// Start records a new session of token id (0: the environment's token,
// which has no id) and returns its cookie, Secure when secure. It first
// deletes the expired sessions.
func (s *Sessions) Start(ctx context.Context, tokenID int64, secure bool) (*http.Cookie, error) {
	if tokenID < 0 {
		return nil, fmt.Errorf("statuspage: token id %d", tokenID)
	}
	if _, err := s.Prune(ctx); err != nil {
		return nil, err
	}
	id := make([]byte, sessionIDBytes)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("statuspage: drawing a session id: %w", err)
	}
	now := s.clock.Now()
	exp := now.Add(s.ttl)
	sum := sha256.Sum256(id)
	if _, err := s.db.Exec(ctx, `INSERT INTO statuspage_sessions (id_sha256, token_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4)`, sum[:], tokenID, now, exp); err != nil {
		return nil, fmt.Errorf("statuspage: recording the session: %w", err)
	}
	return &http.Cookie{
		Name: SessionCookie, Value: base64.RawURLEncoding.EncodeToString(id), Path: "/",
		Expires: exp.UTC(), MaxAge: int(s.ttl / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}, nil
}

// Clear returns a cookie that removes the browser's copy of the session.
func (s *Sessions) Clear(secure bool) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// Verify returns the token id of r's session: ok when r's cookie names a
// session that is recorded (not signed out) and not expired. err: the
// database could not tell now (not a sign-out).
func (s *Sessions) Verify(r *http.Request) (tokenID int64, ok bool, err error) {
	sum, ok := sessionHash(r)
	if !ok {
		return 0, false, nil
	}
	err = s.db.QueryRow(r.Context(), `SELECT token_id FROM statuspage_sessions WHERE id_sha256 = $1 AND expires_at > $2`,
		sum[:], s.clock.Now()).Scan(&tokenID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("statuspage: reading the session: %w", err)
	}
	return tokenID, true, nil
}

// End ends r's session, if its cookie names one: every process refuses
// the cookie from then on. ended: a session was recorded and is no more.
func (s *Sessions) End(ctx context.Context, r *http.Request) (ended bool, err error) {
	sum, ok := sessionHash(r)
	if !ok {
		return false, nil
	}
	if err := s.db.QueryRow(ctx, `SELECT statuspage_session_end($1)`, sum[:]).Scan(&ended); err != nil {
		return false, fmt.Errorf("statuspage: ending the session: %w", err)
	}
	return ended, nil
}

// Prune deletes the sessions expired by the database's clock and returns
// how many.
func (s *Sessions) Prune(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT statuspage_sessions_prune()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("statuspage: deleting expired sessions: %w", err)
	}
	return n, nil
}

// sessionHash is the SHA-256 of the session id in r's cookie; ok false
// when r has no cookie or it does not hold a session id.
func sessionHash(r *http.Request) (sum [sha256.Size]byte, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || len(c.Value) != base64.RawURLEncoding.EncodedLen(sessionIDBytes) {
		return sum, false
	}
	// Strict: the last character's two padding bits must be zero, so
	// that exactly one spelling of an id is accepted.
	id, err := base64.RawURLEncoding.Strict().DecodeString(c.Value)
	if err != nil || len(id) != sessionIDBytes {
		return sum, false
	}
	return sha256.Sum256(id), true
}
