package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/route"
	"github.com/callscribe/callscribe/internal/strictjson"
)

// capsAdminMaxBody bounds a PUT's body: {"limit": N, "reason": "..."}.
const capsAdminMaxBody = 4 << 10

// capsAdmin serves the call caps stored at run time (capacity/orgcap) to
// admin tokens:
//
//	GET /v1/admin/orgs                                      → 200 {orgs: [cap...]}
//	GET /v1/admin/orgs/{org}                                → 200 {cap, campaigns: [cap...]} | 404 not_found
//	PUT /v1/admin/orgs/{org}                  {limit, reason} → 200 {cap, change} | 400 invalid_request (field)
//	GET /v1/admin/orgs/{org}/campaigns/{campaign}           → 200 {cap} | 404 not_found
//	PUT /v1/admin/orgs/{org}/campaigns/{campaign} {limit, reason} → 200 {cap, change} | 400 invalid_request (field)
//	GET /v1/admin/cap-changes?org=&limit=                   → 200 {changes: [change...]} (newest first)
//
// Only a bearer token is read (never a browser's cached Basic
// credentials, so no other site can make a browser send one): none or an
// unknown one is 401, a tenant's token 403, and a token store that cannot
// answer 503. A change is recorded as made by "token ID" (a token of
// `callscribe tokens create`) or by "admin token (CALLSCRIBE_API_TOKEN)".
type capsAdmin struct {
	store  *orgcap.Store
	token  string      // config.EnvAPIToken's value; "" accepts none
	tokens *auth.Store // nil: the environment's token only
	logger *slog.Logger
}

// capsEndpoint is one operation of the admin caps routes and the
// function that answers it.
type capsEndpoint struct {
	route.Route
	fn func(w http.ResponseWriter, r *http.Request, by string)
}

// endpoints is the admin caps routes' table: what handler registers and
// capsAdminRoutes lists.
func (c *capsAdmin) endpoints() []capsEndpoint {
	get := func(path string, fn func(http.ResponseWriter, *http.Request, string)) capsEndpoint {
		return capsEndpoint{route.Route{Method: http.MethodGet, Path: path}, fn}
	}
	put := func(path string) capsEndpoint {
		return capsEndpoint{route.Route{Method: http.MethodPut, Path: path}, c.put}
	}
	return []capsEndpoint{
		get("/v1/admin/orgs", c.listOrgs),
		get("/v1/admin/orgs/{org}", c.getOrg),
		put("/v1/admin/orgs/{org}"),
		get("/v1/admin/orgs/{org}/campaigns/{campaign}", c.getCampaign),
		put("/v1/admin/orgs/{org}/campaigns/{campaign}"),
		get("/v1/admin/cap-changes", c.changes),
	}
}

// capsAdminRoutes lists the operations of capsAdmin's handler, from the
// table it registers. Mount it at "/v1/admin/".
func capsAdminRoutes() []route.Route {
	var out []route.Route
	for _, e := range (&capsAdmin{}).endpoints() {
		out = append(out, e.Route)
	}
	return out
}

// handler returns capsAdmin's routes on one handler; any other path under
// /v1/admin/ is 404 (to an admin: the others get 401 or 403 first).
func (c *capsAdmin) handler() http.Handler {
	mux := http.NewServeMux()
	for _, e := range c.endpoints() {
		mux.HandleFunc(e.Method+" "+e.Path, c.admin(e.fn))
	}
	mux.HandleFunc("/v1/admin/", c.admin(func(w http.ResponseWriter, r *http.Request, _ string) {
		capsError(w, http.StatusNotFound, "not_found", "", "no route "+r.Method+" "+r.URL.Path)
	}))
	return mux
}

// admin passes the request on with who makes it, for an admin's bearer
// token only.
func (c *capsAdmin) admin(next func(w http.ResponseWriter, r *http.Request, by string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		cred = strings.TrimSpace(cred)
		if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" {
			capsUnauthorized(w)
			return
		}
		if c.token != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(c.token)) == 1 {
			next(w, r, "admin token ("+config.EnvAPIToken+")")
			return
		}
		if c.tokens == nil {
			capsUnauthorized(w)
			return
		}
		p, err := c.tokens.Authenticate(r.Context(), cred)
		switch {
		case errors.Is(err, auth.ErrInvalid):
			capsUnauthorized(w)
		case err != nil:
			c.logger.Warn("admin caps api: checking a token", slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "1")
			capsError(w, http.StatusServiceUnavailable, "unavailable", "", "the token could not be checked now; retry")
		case !p.Admin:
			capsError(w, http.StatusForbidden, "forbidden", "", "the caps routes are for admin tokens only")
		default:
			next(w, r, "token "+strconv.FormatInt(p.TokenID, 10))
		}
	}
}

func (c *capsAdmin) listOrgs(w http.ResponseWriter, r *http.Request, _ string) {
	orgs, err := c.store.Orgs(r.Context())
	if err != nil {
		c.failed(w, err)
		return
	}
	writeCapsJSON(w, http.StatusOK, map[string]any{"orgs": orgs})
}

func (c *capsAdmin) getOrg(w http.ResponseWriter, r *http.Request, _ string) {
	org := r.PathValue("org")
	cp, err := c.store.Org(r.Context(), org)
	if err != nil {
		c.failed(w, err)
		return
	}
	camps, err := c.store.Campaigns(r.Context(), org)
	if err != nil {
		c.failed(w, err)
		return
	}
	writeCapsJSON(w, http.StatusOK, map[string]any{"cap": cp, "campaigns": camps})
}

func (c *capsAdmin) getCampaign(w http.ResponseWriter, r *http.Request, _ string) {
	cp, err := c.store.Campaign(r.Context(), r.PathValue("org"), r.PathValue("campaign"))
	if err != nil {
		c.failed(w, err)
		return
	}
	writeCapsJSON(w, http.StatusOK, map[string]any{"cap": cp})
}

// put sets an organisation's cap, or a campaign's when the path names one.
func (c *capsAdmin) put(w http.ResponseWriter, r *http.Request, by string) {
	var body struct {
		Limit  *int   `json:"limit"`
		Reason string `json:"reason"`
	}
	if p := strictjson.MediaTypeProblem(r.Header.Get("Content-Type")); p != "" {
		capsError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "", p+": Content-Type must be application/json")
		return
	}
	if err := strictjson.Decode(http.MaxBytesReader(w, r.Body, capsAdminMaxBody), &body); err != nil {
		var bad *strictjson.Error
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			capsError(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("request body over %d bytes", tooBig.Limit))
		case errors.As(err, &bad):
			field := ""
			if bad.Kind != strictjson.Syntax && bad.Kind != strictjson.Trailing && bad.Kind != strictjson.Empty {
				field = bad.Field()
			}
			capsError(w, http.StatusBadRequest, "invalid_request", field, bad.Error())
		default:
			capsError(w, http.StatusBadRequest, "invalid_request", "", "reading the body: "+err.Error())
		}
		return
	}
	if body.Limit == nil {
		capsError(w, http.StatusBadRequest, "invalid_request", "limit", "limit is required")
		return
	}
	u := orgcap.Update{Org: r.PathValue("org"), Campaign: r.PathValue("campaign"), Limit: *body.Limit, Reason: body.Reason, By: by}
	ch, err := c.store.Set(r.Context(), u)
	if err != nil {
		c.failed(w, err)
		return
	}
	var cp orgcap.Cap
	if u.Campaign == "" {
		cp, err = c.store.Org(r.Context(), u.Org)
	} else {
		cp, err = c.store.Campaign(r.Context(), u.Org, u.Campaign)
	}
	if err != nil {
		c.failed(w, err)
		return
	}
	c.logger.Info("call cap set", slog.String("org", ch.Org), slog.String("campaign", ch.Campaign),
		slog.Int("limit", ch.Limit), slog.String("by", ch.By), slog.Int64("change", ch.ID))
	writeCapsJSON(w, http.StatusOK, map[string]any{"cap": cp, "change": ch})
}

func (c *capsAdmin) changes(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > orgcap.HistoryMaxRows {
			capsError(w, http.StatusBadRequest, "invalid_request", "limit", fmt.Sprintf("limit must be 1–%d", orgcap.HistoryMaxRows))
			return
		}
		limit = n
	}
	changes, err := c.store.History(r.Context(), q.Get("org"), limit)
	if err != nil {
		c.failed(w, err)
		return
	}
	writeCapsJSON(w, http.StatusOK, map[string]any{"changes": changes})
}

// failed answers a Store error: 400 naming the field, 404, or 500 (the
// details to the log only).
func (c *capsAdmin) failed(w http.ResponseWriter, err error) {
	var ie *orgcap.InvalidError
	switch {
	case errors.As(err, &ie):
		capsError(w, http.StatusBadRequest, "invalid_request", ie.Field, ie.Field+" "+ie.Reason)
	case errors.Is(err, orgcap.ErrNotFound):
		capsError(w, http.StatusNotFound, "not_found", "", "no stored cap")
	case errors.Is(err, context.Canceled):
		capsError(w, http.StatusServiceUnavailable, "unavailable", "", "the request ended")
	default:
		c.logger.Error("admin caps api", slog.String("error", err.Error()))
		capsError(w, http.StatusInternalServerError, "internal", "", "reading or writing the caps failed")
	}
}

func capsUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer `+adminRealm)
	capsError(w, http.StatusUnauthorized, "unauthorized", "", "an admin token is required")
}

func capsError(w http.ResponseWriter, status int, typ, field, msg string) {
	e := map[string]string{"type": typ, "message": msg}
	if field != "" {
		e["field"] = field
	}
	writeCapsJSON(w, status, map[string]any{"error": e})
}

func writeCapsJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
