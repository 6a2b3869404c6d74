package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
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
//
// A browser sends cached Basic credentials with any request to the site,
// one another site makes it send too: so before that, a request other than
// GET and HEAD must be one of this site's own (see crossSite), or it is
// refused with 403 and a JSON error.
func requireAdmin(next http.Handler, isAdmin func(r *http.Request) (bool, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := crossSite(r); why != "" {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": why})
			return
		}
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
// value of config.EnvAPIToken; "" accepts none) and, when authenticate is not nil,
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

// crossSite returns why r, not a GET or HEAD, may have been sent by a
// browser on behalf of another site, or "" when it cannot have been:
//
//   - Sec-Fetch-Site, when sent, is "same-origin";
//   - Origin, when sent, is this server's scheme://host (requestOrigin);
//   - and the body is application/json, which no form and no cross-site
//     fetch without a CORS preflight (which this server never grants) can
//     send, or else the browser vouched for the request by one of those
//     headers. River UI v0.22.0's page posts its JSON as fetch's default
//     text/plain;charset=UTF-8 and pauses queues with a bodiless PUT; from
//     its own page the browser sends Origin and Sec-Fetch-Site: same-origin.
//     A client that is no browser sends application/json.
func crossSite(r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return ""
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return "cross-site request refused (Sec-Fetch-Site: " + site + ")"
	}
	origin := r.Header.Get("Origin")
	if origin != "" && !strings.EqualFold(origin, requestOrigin(r)) {
		return "cross-origin request refused (Origin is not this server's)"
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		return ""
	}
	if site == "same-origin" || origin != "" {
		return ""
	}
	return "a " + r.Method + " needs Content-Type: application/json"
}

// requestOrigin is the scheme://host r was sent to, as a browser writes it
// in Origin. Behind a proxy that ends TLS, its X-Forwarded-Proto and
// X-Forwarded-Host say what the browser used: a page of another site
// cannot make a browser send those headers without a CORS preflight.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); strings.TrimSpace(p) != "" {
		scheme = strings.ToLower(strings.TrimSpace(p))
	}
	host := r.Host
	if h, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Host"), ","); strings.TrimSpace(h) != "" {
		host = strings.TrimSpace(h)
	}
	return scheme + "://" + strings.ToLower(host)
}
