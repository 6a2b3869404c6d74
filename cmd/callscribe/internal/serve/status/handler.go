package status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/route"
)

// Paths the handler serves besides "/".
const (
	// PathPrefix holds the page's other paths.
	PathPrefix = "/status/"
	DataPath   = "/status/data"
	LoginPath  = "/status/login"
	LogoutPath = "/status/logout"
	// RefreshEveryDefault is how often the page refreshes its sections.
	RefreshEveryDefault = 5 * time.Second
	// maxLoginForm bounds a sign-in request's body.
	maxLoginForm = 4 << 10
)

// Config wires the handler to its data and its checks.
type Config struct {
	// Snapshot reads what the page shows. Required. An error is answered
	// 503; a source that fails alone belongs in Snapshot.Problems.
	Snapshot func(ctx context.Context) (Snapshot, error)
	// IsAdmin reports whether r carries an admin's credential (a bearer
	// token); an error means it cannot tell now (503). Required.
	IsAdmin func(r *http.Request) (bool, error)
	// SignIn checks a token typed into the sign-in form: ok when it is an
	// admin's, with its id (0 for a token that has none). Required.
	SignIn func(ctx context.Context, token string) (tokenID int64, ok bool, err error)
	// StillValid reports whether the admin token a session was signed in
	// with is still valid (not revoked), on every request of the session.
	// Required.
	StillValid func(ctx context.Context, tokenID int64) (bool, error)
	// Sessions keeps the sessions of signed-in browsers. Required.
	Sessions *Sessions
	// SecureCookies: when the session cookie is Secure, and whether the
	// page's own origin is https behind a proxy. Default SecureAuto.
	SecureCookies SecureCookies
	// RefreshEvery: how often the page refreshes. Default
	// RefreshEveryDefault.
	RefreshEvery time.Duration
	// Logger: default slog.Default().
	Logger *slog.Logger
}

// Handler serves the page: mount it at "GET /{$}" and PathPrefix.
type Handler struct {
	cfg Config
}

// New returns the page's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Snapshot == nil || cfg.IsAdmin == nil || cfg.SignIn == nil || cfg.StillValid == nil || cfg.Sessions == nil {
		return nil, errors.New("statuspage: Config needs Snapshot, IsAdmin, SignIn, StillValid and Sessions")
	}
	secure, err := ParseSecureCookies(string(cfg.SecureCookies))
	if err != nil {
		return nil, fmt.Errorf("statuspage: SecureCookies: %w", err)
	}
	cfg.SecureCookies = secure
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.RefreshEvery = refreshOr(cfg.RefreshEvery)
	return &Handler{cfg: cfg}, nil
}

// ServeHTTP serves "/", DataPath, LoginPath and LogoutPath. A request
// other than GET and HEAD from another origin is refused with 403 (see
// crossOrigin).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the page's own forms, which crossOrigin refuses.
	// Nothing is sent to another origin either way.
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if why := h.crossOrigin(r); why != "" {
			h.cfg.Logger.Warn("status page: cross-origin request refused", slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.String("why", why))
			http.Error(w, why, http.StatusForbidden)
			return
		}
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	for _, e := range h.endpoints() {
		if r.URL.Path == e.Path && method == e.Method {
			e.fn(w, r)
			return
		}
	}
	http.NotFound(w, r)
}

// endpoint is one operation of the page and the function that answers it.
type endpoint struct {
	route.Route
	fn http.HandlerFunc
}

// endpoints is the page's route table: what ServeHTTP answers (a GET
// answers HEAD too) and Routes lists.
func (h *Handler) endpoints() []endpoint {
	return []endpoint{
		{route.Route{Method: http.MethodGet, Path: "/"}, func(w http.ResponseWriter, r *http.Request) { h.page(w, r, false) }},
		{route.Route{Method: http.MethodGet, Path: DataPath}, func(w http.ResponseWriter, r *http.Request) { h.page(w, r, true) }},
		{route.Route{Method: http.MethodPost, Path: LoginPath}, h.login},
		{route.Route{Method: http.MethodGet, Path: LoginPath}, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/", http.StatusSeeOther)
		}},
		{route.Route{Method: http.MethodPost, Path: LogoutPath}, h.logout},
	}
}

// Routes lists the operations of the page's handler, from the table
// ServeHTTP answers by; every other path or method is 404.
func Routes() []route.Route {
	var out []route.Route
	for _, e := range (&Handler{}).endpoints() {
		out = append(out, e.Route)
	}
	return out
}

// authorised: a recorded session whose token is still valid, or an
// admin's bearer token.
func (h *Handler) authorised(r *http.Request) (bool, error) {
	id, ok, err := h.cfg.Sessions.Verify(r)
	if err != nil {
		return false, err
	}
	if ok {
		valid, err := h.cfg.StillValid(r.Context(), id)
		if err != nil || valid {
			return valid, err
		}
	}
	return h.cfg.IsAdmin(r)
}

// secure reports whether r's cookies are Secure (Config.SecureCookies).
func (h *Handler) secure(r *http.Request) bool {
	switch h.cfg.SecureCookies {
	case SecureAlways:
		return true
	case SecureNever:
		return false
	}
	return r.TLS != nil
}

// crossOrigin returns why r, a request that may change state, is refused
// as another site's, or "" when it is not: Sec-Fetch-Site, when sent, must
// be same-origin or none (typed by the user), and Origin, when sent, must
// be the page's own origin (ownOrigin). A request with neither header
// (curl, an old client) is not a browser's cross-site request: allowed.
func (h *Handler) crossOrigin(r *http.Request) string {
	if site := r.Header.Values("Sec-Fetch-Site"); len(site) > 0 {
		if len(site) > 1 || (site[0] != "same-origin" && site[0] != "none") {
			return "cross-site request refused (Sec-Fetch-Site: " + strings.Join(site, ", ") + ")"
		}
	}
	if origin := r.Header.Values("Origin"); len(origin) > 0 {
		if len(origin) > 1 || !sameOrigin(origin[0], h.ownOrigin(r)) {
			return "cross-origin request refused (Origin is not this page's)"
		}
	}
	return ""
}

// ownOrigin is the page's origin as r's browser would write it: https
// when r came over TLS or cookies are always Secure (a TLS proxy in
// front), else http; and r's Host.
func (h *Handler) ownOrigin(r *http.Request) *url.URL {
	scheme := "http"
	if r.TLS != nil || h.cfg.SecureCookies == SecureAlways {
		scheme = "https"
	}
	return &url.URL{Scheme: scheme, Host: r.Host}
}

// sameOrigin reports whether the Origin header value origin is own:
// scheme and host alike (case aside), a default port written or not.
func sameOrigin(origin string, own *url.URL) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false // "null" and other opaque origins too
	}
	return strings.EqualFold(u.Scheme, own.Scheme) && originHost(u.Scheme, u.Host) == originHost(own.Scheme, own.Host)
}

// originHost is host in lower case without its scheme's default port.
func originHost(scheme, host string) string {
	host = strings.ToLower(host)
	switch strings.ToLower(scheme) {
	case "http":
		host = strings.TrimSuffix(host, ":80")
	case "https":
		host = strings.TrimSuffix(host, ":443")
	}
	return host
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request, sections bool) {
	ok, err := h.authorised(r)
	switch {
	case err != nil:
		h.cfg.Logger.Warn("status page: the credential could not be checked", slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the token could not be checked now; retry", http.StatusServiceUnavailable)
		return
	case !ok && sections:
		w.Header().Add("WWW-Authenticate", `Bearer realm="callscribe admin"`)
		http.Error(w, "an admin token or a session is required", http.StatusUnauthorized)
		return
	case !ok:
		w.Header().Add("WWW-Authenticate", `Bearer realm="callscribe admin"`)
		h.writeLogin(w, http.StatusUnauthorized, "")
		return
	}
	snap, err := h.cfg.Snapshot(r.Context())
	if err != nil {
		h.cfg.Logger.Warn("status page: reading the snapshot", slog.String("error", err.Error()))
		http.Error(w, "the status could not be read now; retry", http.StatusServiceUnavailable)
		return
	}
	var buf bytes.Buffer
	if sections {
		err = RenderSections(&buf, snap)
	} else {
		err = Render(&buf, snap, h.cfg.RefreshEvery)
	}
	if err != nil {
		h.cfg.Logger.Error("status page: rendering", slog.String("error", err.Error()))
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		h.writeLogin(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	id, ok, err := h.cfg.SignIn(r.Context(), r.PostForm.Get("token"))
	switch {
	case err != nil:
		h.cfg.Logger.Warn("status page: sign-in could not check the token", slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		h.writeLogin(w, http.StatusServiceUnavailable, "The token could not be checked now; try again.")
	case !ok:
		h.cfg.Logger.Info("status page: sign-in refused")
		h.writeLogin(w, http.StatusUnauthorized, "That is not a valid admin token.")
	default:
		c, err := h.cfg.Sessions.Start(r.Context(), id, h.secure(r))
		if err != nil {
			h.cfg.Logger.Warn("status page: sign-in could not record the session", slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "1")
			h.writeLogin(w, http.StatusServiceUnavailable, "The session could not be recorded now; try again.")
			return
		}
		// The browser's previous session, if any, ends with this one's start.
		if _, err := h.cfg.Sessions.End(r.Context(), r); err != nil {
			h.cfg.Logger.Warn("status page: sign-in could not end the previous session", slog.String("error", err.Error()))
		}
		h.cfg.Logger.Info("status page: signed in", slog.Int64("token_id", id))
		http.SetCookie(w, c)
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

// logout ends the session server-side, then clears the browser's cookie.
// When the session cannot be ended now the cookie is kept and the answer
// is 503: a cleared cookie whose session lives on would be a sign-out in
// appearance only.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	ended, err := h.cfg.Sessions.End(r.Context(), r)
	if err != nil {
		h.cfg.Logger.Warn("status page: sign-out could not end the session", slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the session could not be ended now; retry", http.StatusServiceUnavailable)
		return
	}
	if ended {
		h.cfg.Logger.Info("status page: signed out")
	}
	http.SetCookie(w, h.cfg.Sessions.Clear(h.secure(r)))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) writeLogin(w http.ResponseWriter, status int, msg string) {
	var buf bytes.Buffer
	if err := renderLogin(&buf, msg); err != nil {
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}
