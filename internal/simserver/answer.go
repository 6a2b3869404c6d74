package simserver

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// Answer is what a simulator writes for one request.
type Answer struct {
	Status      int
	ContentType string
	RetryAfter  string      // the Retry-After value; "" for none
	Header      http.Header // further headers; ContentType and RetryAfter win
	Body        []byte      // written followed by a line break
}

// Write writes a: its headers, its status, its body and a line break.
func Write(w http.ResponseWriter, a Answer) {
	h := w.Header()
	for k, v := range a.Header {
		h[k] = v
	}
	h.Set("Content-Type", a.ContentType)
	if a.RetryAfter != "" {
		h.Set("Retry-After", a.RetryAfter)
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(append(a.Body, '\n'))
}

// HangUp closes the connection under w without answering, with a TCP reset
// where it can, so that the client sees "connection reset by peer". A
// ResponseWriter that cannot be hijacked (HTTP/2) makes it panic with
// http.ErrAbortHandler, which net/http turns into an aborted response.
func HangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok { // TLS
		raw = nc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Credentials are the Bearer credentials a simulator accepts.
type Credentials struct{ known [][]byte }

// NewCredentials returns Credentials that accept each of known.
func NewCredentials(known []string) Credentials {
	var c Credentials
	for _, k := range known {
		c.known = append(c.known, []byte(k))
	}
	return c
}

// Authenticate returns the Bearer credential of r (the scheme in any case,
// surrounding white space trimmed) and whether it is a known one. It
// compares against every known credential in constant time.
func (c Credentials) Authenticate(r *http.Request) (string, bool) {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	found := false
	for _, k := range c.known {
		if subtle.ConstantTimeCompare([]byte(cred), k) == 1 {
			found = true
		}
	}
	return cred, found && cred != ""
}
