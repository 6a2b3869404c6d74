package statuspage

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// Session defaults.
const (
	// SessionTTLDefault is how long a sign-in lasts.
	SessionTTLDefault = 12 * time.Hour
	// SessionCookie is the cookie's name.
	SessionCookie = "callscribe_status"
)

// Sessions signs and checks the session cookie of a browser signed in at
// LoginPath. The cookie holds the admin token's id and an expiry, signed
// with HMAC-SHA256 under a key drawn at random when the Sessions is made:
// never the token itself. A restart (a new key) signs everyone out.
type Sessions struct {
	key   []byte
	ttl   time.Duration
	clock clock.Clock
}

// NewSessions returns Sessions with a fresh random key. ttl 0:
// SessionTTLDefault; c nil: the real clock.
func NewSessions(ttl time.Duration, c clock.Clock) (*Sessions, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("statuspage: drawing a session key: %w", err)
	}
	if ttl <= 0 {
		ttl = SessionTTLDefault
	}
	if c == nil {
		c = clock.System{}
	}
	return &Sessions{key: key, ttl: ttl, clock: c}, nil
}

// Cookie returns the session cookie for token id (0: the environment's
// token, which has no id). secure: the request came over TLS.
func (s *Sessions) Cookie(tokenID int64, secure bool) *http.Cookie {
	exp := s.clock.Now().Add(s.ttl)
	payload := "v1." + strconv.FormatInt(tokenID, 10) + "." + strconv.FormatInt(exp.Unix(), 10)
	return &http.Cookie{
		Name: SessionCookie, Value: payload + "." + s.sign(payload), Path: "/",
		Expires: exp.UTC(), MaxAge: int(s.ttl / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
}

// Clear returns a cookie that removes the session.
func (s *Sessions) Clear(secure bool) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// Verify returns the token id of r's session cookie when it carries one
// signed by s and not expired.
func (s *Sessions) Verify(r *http.Request) (tokenID int64, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return 0, false
	}
	payload, sig := c.Value[:i], c.Value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.sign(payload))) {
		return 0, false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return 0, false
	}
	id, err1 := strconv.ParseInt(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || id < 0 || !s.clock.Now().Before(time.Unix(exp, 0)) {
		return 0, false
	}
	return id, true
}

func (s *Sessions) sign(payload string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
