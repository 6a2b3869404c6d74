package httpapi

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
)

// Defaults and bounds of the HTTP API.
const (
	// MaxBodyDefault is Options.MaxBodyBytes's default: 64 KiB,
	// room for a refresh of about 300 leases.
	MaxBodyDefault = 64 << 10
	// SlotWaitMax is the longest timeout_ms POST /v1/slots accepts: the
	// request holds its connection while it waits.
	SlotWaitMax = 30 * time.Second
)

// Options configures NewHandler.
type Options struct {
	// Logger receives request failures that are the server's. Default nil:
	// discard.
	Logger *slog.Logger
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); others get 401. Default "": no
	// authentication, so bind the server to a private address.
	Token string
	// MaxBodyBytes caps a request body; a larger one gets 413.
	// Default 0: MaxBodyDefault (64 KiB).
	MaxBodyBytes int64
	// Agents: each agent's providers, primary first, then fallbacks, for
	// POST /v1/calls/{call_id}/transcriber. Default nil: that route answers
	// 404 unknown agent.
	Agents map[string]live.CallProviders
}

// NewHandler returns the JSON HTTP API through which live-call runtimes
// in other languages take and give back vendor leases and call slots. slots
// may be nil: the /v1/slots and /v1/calls routes then answer 501.
//
// Routes (all bodies JSON; errors are {"error":{"type","message",...}}):
//
//	POST /v1/leases                    {provider, kind, holder, lane} → 200 {granted, lease, in_use, limit, uncounted}
//	POST /v1/leases/refresh            {leases:[lease...]}            → 200 {refreshed, lost, failed}
//	POST /v1/leases/release            {lease}                        → 204
//	POST /v1/slots                     {org, campaign, timeout_ms, retry_ms} → 200 {slot} | 409 no_slot
//	POST /v1/slots/bind                {slot, call_id}                → 204 | 409 already_bound
//	POST /v1/slots/release             {slot}                         → 204
//	POST /v1/calls/{call_id}/release                                  → 204
//	POST /v1/calls/{call_id}/transcriber {agent}                      → 200 {provider, lease, over_limit, fell_back}
//	GET  /v1/status                                                   → 200 {providers, live_calls}
//
// A lease or slot object is sent back exactly as it was received. The
// server keeps no lease alive for an HTTP client: the client refreshes its
// own leases through /v1/leases/refresh before they expire, so the leases
// of a client that dies lapse on their own. Like the library, the API fails
// open: when Redis is down, acquires answer 200 granted and uncounted and
// releases 204, never 5xx. Request bodies must be Content-Type
// application/json, which also keeps browsers from posting to the API
// cross-origin without a preflight.
func NewHandler(leases *capacity.Leases, slots *capacity.Slots, opts Options) http.Handler {
	if leases == nil {
		panic("httpapi.NewHandler: leases is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = MaxBodyDefault
	}
	h := &httpAPI{leases: leases, slots: slots, opts: opts}
	mux := http.NewServeMux()
	route := func(pattern, method string, fn func(http.ResponseWriter, *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method {
				w.Header().Set("Allow", method)
				writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method), nil)
				return
			}
			fn(w, r)
		})
	}
	route("/v1/leases", http.MethodPost, h.leaseAcquire)
	route("/v1/leases/refresh", http.MethodPost, h.leaseRefresh)
	route("/v1/leases/release", http.MethodPost, h.leaseRelease)
	route("/v1/slots", http.MethodPost, h.needSlots(h.slotAcquire))
	route("/v1/slots/bind", http.MethodPost, h.needSlots(h.slotBind))
	route("/v1/slots/release", http.MethodPost, h.needSlots(h.slotRelease))
	route("/v1/calls/{call_id}/release", http.MethodPost, h.needSlots(h.callRelease))
	route("/v1/calls/{call_id}/transcriber", http.MethodPost, h.callTranscriber)
	route("/v1/status", http.MethodGet, h.status)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.URL.Path, nil)
	})
	return h.authenticate(mux)
}

type httpAPI struct {
	leases *capacity.Leases
	slots  *capacity.Slots
	opts   Options
}

func (h *httpAPI) authenticate(next http.Handler) http.Handler {
	if h.opts.Token == "" {
		return next
	}
	want := []byte(h.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 9110 section 11.1).
		scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") ||
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="callscribe capacity"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}
