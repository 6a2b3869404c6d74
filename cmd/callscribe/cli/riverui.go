package cli

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"
)

// RiverUIPrefix is the path River UI is served under, pages and API alike.
const RiverUIPrefix = "/riverui"

// newRiverUI returns River UI serving under RiverUIPrefix: its pages, and
// its JSON API under RiverUIPrefix+"/api", which reads and changes River's
// tables (cancel, retry and delete jobs, pause queues) through client's
// pool. client need not be started: an insert-only client will do. The UI's
// background count caches run until stop is called or ctx ends; call stop
// once the HTTP server no longer serves the handler.
//
// The handler checks nothing itself: mount it behind requireAdmin.
func newRiverUI(ctx context.Context, client *river.Client[pgx.Tx], logger *slog.Logger) (handler http.Handler, stop func(), err error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger.With(slog.String("component", "riverui")),
		Prefix:    RiverUIPrefix,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("river ui: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	if err := h.Start(ctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("starting river ui: %w", err)
	}
	return h, cancel, nil
}

// adminRealm is the realm of requireAdmin's challenges.
const adminRealm = `realm="callscribe admin"`

// requireAdmin passes a request on to next only when isAdmin says it carries
// an admin's credential. Otherwise it answers 401 with a Bearer challenge,
// and a Basic one so that a browser asks for the token (see
// adminCredential); when isAdmin cannot tell (the token store is down), 503
// with Retry-After, so a client retries rather than drops its token.
func requireAdmin(next http.Handler, isAdmin func(r *http.Request) (bool, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := isAdmin(r)
		switch {
		case err != nil:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the token could not be checked now; retry", http.StatusServiceUnavailable)
		case !ok:
			w.Header().Add("WWW-Authenticate", "Bearer "+adminRealm)
			w.Header().Add("WWW-Authenticate", "Basic "+adminRealm+`, charset="UTF-8"`)
			http.Error(w, "an admin token is required", http.StatusUnauthorized)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// adminCredential returns the token r carries: "Authorization: Bearer
// TOKEN", or the password of HTTP Basic authentication (any user name), which
// a browser sends on every request of a page once asked. "" when it carries
// none.
func adminCredential(r *http.Request) string {
	if _, pass, ok := r.BasicAuth(); ok {
		return pass
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(cred)
}

// adminCheck returns requireAdmin's isAdmin for serve's tokens: token (the
// value of EnvAPIToken; "" accepts none) and, when authenticate is not nil,
// the admin tokens of `callscribe tokens create` (serveAuthenticator). A
// tenant's token is not an admin's.
func adminCheck(token string, authenticate func(ctx context.Context, bearer string) (org string, admin, valid bool, err error)) func(r *http.Request) (bool, error) {
	return func(r *http.Request) (bool, error) {
		cred := adminCredential(r)
		switch {
		case cred == "":
			return false, nil
		case token != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(token)) == 1:
			return true, nil
		case authenticate == nil:
			return false, nil
		}
		_, admin, valid, err := authenticate(r.Context(), cred)
		if err != nil {
			return false, err
		}
		return valid && admin, nil
	}
}
