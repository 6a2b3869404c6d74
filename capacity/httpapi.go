package capacity

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Defaults and bounds of the HTTP API.
const (
	// HTTPMaxBodyDefault is HTTPOptions.MaxBodyBytes's default: 64 KiB,
	// room for a refresh of about 300 leases.
	HTTPMaxBodyDefault = 64 << 10
	// HTTPSlotWaitMax is the longest timeout_ms POST /v1/slots accepts: the
	// request holds its connection while it waits.
	HTTPSlotWaitMax = 30 * time.Second
)

// HTTPOptions configures NewHTTPHandler.
type HTTPOptions struct {
	// Logger receives request failures that are the server's. Default nil:
	// discard.
	Logger *slog.Logger
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); others get 401. Default "": no
	// authentication, so bind the server to a private address.
	Token string
	// MaxBodyBytes caps a request body; a larger one gets 413.
	// Default 0: HTTPMaxBodyDefault (64 KiB).
	MaxBodyBytes int64
	// Agents: each agent's providers, primary first, then fallbacks, for
	// POST /v1/calls/{call_id}/transcriber. Default nil: that route answers
	// 404 unknown agent.
	Agents map[string]CallProviders
}

// NewHTTPHandler returns the JSON HTTP API through which live-call runtimes
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
func NewHTTPHandler(leases *Leases, slots *Slots, opts HTTPOptions) http.Handler {
	if leases == nil {
		panic("capacity.NewHTTPHandler: leases is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = HTTPMaxBodyDefault
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
	leases *Leases
	slots  *Slots
	opts   HTTPOptions
}

// leaseJSON is a lease on the wire. Counted is what the server needs back
// to release or refresh it: false for an uncounted (fail-open) lease.
type leaseJSON struct {
	ID       string    `json:"id"`
	Provider string    `json:"provider"`
	Kind     string    `json:"kind"`
	Holder   string    `json:"holder"`
	Expires  time.Time `json:"expires"`
	// Counted: absent means true, so a client that drops it still gives
	// the slot back on release.
	Counted *bool `json:"counted,omitempty"`
}

func toLeaseJSON(l Lease) *leaseJSON {
	counted := l.counted
	return &leaseJSON{ID: l.ID, Provider: l.Provider, Kind: l.Kind, Holder: l.Holder, Expires: l.Expires.UTC(), Counted: &counted}
}

// lease rebuilds the Lease a client sends back. A lease claiming to be
// counted for a provider/kind with no configured limit cannot be in Redis,
// so it is treated as uncounted.
func (h *httpAPI) lease(j *leaseJSON, field string) (Lease, error) {
	if j == nil {
		return Lease{}, fieldError(field, "is required")
	}
	if err := checkProviderKind(j.Provider, j.Kind, field+"."); err != nil {
		return Lease{}, err
	}
	if j.ID == "" {
		return Lease{}, fieldError(field+".id", "is required")
	}
	counted := j.Counted == nil || *j.Counted
	if _, ok := h.leases.cfg.Limits[h.leases.tag(j.Provider, j.Kind)]; !ok {
		counted = false
	}
	return Lease{ID: j.ID, Provider: j.Provider, Kind: j.Kind, Holder: j.Holder, Expires: j.Expires, counted: counted}, nil
}

// forget drops a lease from this process's held set: an HTTP client holds
// it and refreshes it itself, so a Heartbeat in this process must not keep
// it alive after the client is gone.
func (l *Leases) forget(id string) {
	l.mu.Lock()
	delete(l.held, id)
	l.mu.Unlock()
}

func checkProviderKind(provider, kind, prefix string) error {
	if provider == "" {
		return fieldError(prefix+"provider", "is required")
	}
	if strings.ContainsAny(provider, "{}") {
		return fieldError(prefix+"provider", "must not contain braces")
	}
	if kind != KindSTT && kind != KindTTS {
		return fieldError(prefix+"kind", fmt.Sprintf("must be %q or %q", KindSTT, KindTTS))
	}
	return nil
}

func (h *httpAPI) leaseAcquire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Provider string `json:"provider"`
		Kind     string `json:"kind"`
		Holder   string `json:"holder"`
		Lane     string `json:"lane"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	var lane Lane
	err := checkProviderKind(req.Provider, req.Kind, "")
	switch {
	case err != nil:
	case req.Holder == "":
		err = fieldError("holder", "is required")
	case req.Lane == "live":
		lane = Live
	case req.Lane == "batch":
		lane = Batch
	default:
		err = fieldError("lane", `must be "live" or "batch"`)
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	lease, g := h.leases.Acquire(r.Context(), Request{Provider: req.Provider, Kind: req.Kind, Holder: req.Holder, Lane: lane})
	resp := struct {
		Granted   bool       `json:"granted"`
		Lease     *leaseJSON `json:"lease"`
		InUse     int        `json:"in_use"`
		Limit     int        `json:"limit"`
		Uncounted bool       `json:"uncounted"`
	}{Granted: g.Granted, InUse: g.InUse, Limit: g.Limit, Uncounted: g.Uncounted}
	if g.Granted {
		h.leases.forget(lease.ID)
		resp.Lease = toLeaseJSON(lease)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *httpAPI) leaseRefresh(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Leases []*leaseJSON `json:"leases"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	if req.Leases == nil {
		writeInvalid(w, fieldError("leases", "is required (an array, possibly empty)"))
		return
	}
	held := make([]Lease, 0, len(req.Leases))
	for i, j := range req.Leases {
		l, err := h.lease(j, fmt.Sprintf("leases[%d]", i))
		if err != nil {
			writeInvalid(w, err)
			return
		}
		held = append(held, l)
	}
	res := h.leases.Refresh(r.Context(), held)
	resp := struct {
		Refreshed []*leaseJSON `json:"refreshed"`
		Lost      []*leaseJSON `json:"lost"`
		// Failed: Redis could not be reached; nothing was refreshed and
		// nothing is known lost (fail open). Retry at the next beat.
		Failed bool `json:"failed"`
	}{Refreshed: []*leaseJSON{}, Lost: []*leaseJSON{}, Failed: res.Failed}
	for _, l := range res.Refreshed {
		resp.Refreshed = append(resp.Refreshed, toLeaseJSON(l))
	}
	for _, l := range res.Lost {
		resp.Lost = append(resp.Lost, toLeaseJSON(l))
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *httpAPI) leaseRelease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Lease *leaseJSON `json:"lease"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	l, err := h.lease(req.Lease, "lease")
	if err != nil {
		writeInvalid(w, err)
		return
	}
	h.leases.Release(r.Context(), l)
	w.WriteHeader(http.StatusNoContent)
}

// slotJSON is a call slot on the wire; Expires is needed back by bind.
type slotJSON struct {
	Org       string    `json:"org"`
	Campaign  string    `json:"campaign"`
	ID        string    `json:"id"`
	Uncounted bool      `json:"uncounted"`
	Expires   time.Time `json:"expires,omitzero"`
}

func (h *httpAPI) slot(j *slotJSON, needExpiry bool) (Slot, error) {
	switch {
	case j == nil:
		return Slot{}, fieldError("slot", "is required")
	case j.Org == "":
		return Slot{}, fieldError("slot.org", "is required")
	case j.Uncounted:
		return Slot{Org: j.Org, Campaign: j.Campaign, Uncounted: true, s: h.slots}, nil
	case j.ID == "":
		return Slot{}, fieldError("slot.id", "is required unless the slot is uncounted")
	case needExpiry && j.Expires.IsZero():
		return Slot{}, fieldError("slot.expires", "is required to bind a counted slot")
	}
	return Slot{Org: j.Org, Campaign: j.Campaign, ID: j.ID, expMs: j.Expires.UnixMilli(), s: h.slots}, nil
}

func (h *httpAPI) needSlots(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.slots == nil {
			writeError(w, http.StatusNotImplemented, "slots_disabled", "call slots are not enabled on this server", nil)
			return
		}
		fn(w, r)
	}
}

func (h *httpAPI) slotAcquire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Org       string `json:"org"`
		Campaign  string `json:"campaign"`
		TimeoutMs int64  `json:"timeout_ms"`
		RetryMs   int64  `json:"retry_ms"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	var err error
	switch {
	case req.Org == "":
		err = fieldError("org", "is required")
	case req.TimeoutMs < 0 || req.TimeoutMs > HTTPSlotWaitMax.Milliseconds():
		err = fieldError("timeout_ms", fmt.Sprintf("must be 0–%d", HTTPSlotWaitMax.Milliseconds()))
	case req.RetryMs < 0 || req.RetryMs > HTTPSlotWaitMax.Milliseconds():
		err = fieldError("retry_ms", fmt.Sprintf("must be 0–%d (0: %d)", HTTPSlotWaitMax.Milliseconds(), RetryIntervalDefault.Milliseconds()))
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	sl, err := h.slots.Acquire(r.Context(), req.Org, req.Campaign,
		time.Duration(req.TimeoutMs)*time.Millisecond, time.Duration(req.RetryMs)*time.Millisecond)
	var noSlot *NoSlotError
	switch {
	case errors.As(err, &noSlot):
		writeError(w, http.StatusConflict, "no_slot", noSlot.Error(), map[string]any{
			"org": noSlot.Org, "campaign": noSlot.Campaign,
			"org_in_use": noSlot.OrgInUse, "org_limit": noSlot.OrgLimit,
			"campaign_in_use": noSlot.CampaignInUse, "campaign_limit": noSlot.CampaignLimit})
		return
	case err != nil:
		// Only the request's context ends Acquire otherwise: the client
		// has gone, so nobody reads this.
		writeError(w, http.StatusServiceUnavailable, "canceled", err.Error(), nil)
		return
	}
	out := &slotJSON{Org: sl.Org, Campaign: sl.Campaign, ID: sl.ID, Uncounted: sl.Uncounted}
	if sl.expMs != 0 {
		out.Expires = time.UnixMilli(sl.expMs).UTC()
	}
	writeJSON(w, http.StatusOK, struct {
		Slot *slotJSON `json:"slot"`
	}{out})
}

func (h *httpAPI) slotBind(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Slot   *slotJSON `json:"slot"`
		CallID string    `json:"call_id"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	sl, err := h.slot(req.Slot, true)
	if err == nil && req.CallID == "" {
		err = fieldError("call_id", "is required")
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if err := sl.Bind(r.Context(), req.CallID); err != nil {
		if errors.Is(err, ErrAlreadyBound) {
			writeError(w, http.StatusConflict, "already_bound", err.Error()+"; this slot was released", map[string]any{"call_id": req.CallID})
			return
		}
		h.opts.Logger.Error("capacity http: binding a slot", slog.String("call_id", req.CallID), slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "internal", "binding the slot failed", nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *httpAPI) slotRelease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Slot *slotJSON `json:"slot"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	sl, err := h.slot(req.Slot, false)
	if err != nil {
		writeInvalid(w, err)
		return
	}
	_ = sl.Release(r.Context()) // fails open: always nil
	w.WriteHeader(http.StatusNoContent)
}

func (h *httpAPI) callRelease(w http.ResponseWriter, r *http.Request) {
	_ = h.slots.ReleaseCall(r.Context(), r.PathValue("call_id")) // fails open: always nil
	w.WriteHeader(http.StatusNoContent)
}

func (h *httpAPI) status(w http.ResponseWriter, r *http.Request) {
	st, err := h.leases.Status(r.Context())
	if err != nil {
		h.opts.Logger.Warn("capacity http: status", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "unavailable", "reading capacity status from Redis failed", nil)
		return
	}
	type peak struct {
		Minute time.Time `json:"minute"`
		Peak   int       `json:"peak"`
	}
	type provider struct {
		Provider        string `json:"provider"`
		Kind            string `json:"kind"`
		InUse           int    `json:"in_use"`
		ConfiguredLimit int    `json:"configured_limit"`
		EffectiveLimit  int    `json:"effective_limit"`
		Learned         bool   `json:"learned"`
		PeakPerMinute   []peak `json:"peak_per_minute"`
	}
	resp := struct {
		Providers []provider `json:"providers"`
		// LiveCalls is absent when call slots are not enabled.
		LiveCalls *int `json:"live_calls,omitempty"`
	}{Providers: make([]provider, 0, len(st))}
	for _, s := range st {
		p := provider{Provider: s.Provider, Kind: s.Kind, InUse: s.InUse, ConfiguredLimit: s.ConfiguredLimit,
			EffectiveLimit: s.EffectiveLimit, Learned: s.Learned, PeakPerMinute: make([]peak, 0, len(s.PeakPerMinute))}
		for _, m := range s.PeakPerMinute {
			p.PeakPerMinute = append(p.PeakPerMinute, peak(m))
		}
		resp.Providers = append(resp.Providers, p)
	}
	if h.slots != nil {
		n, err := h.slots.LiveCalls(r.Context())
		if err != nil {
			h.opts.Logger.Warn("capacity http: live calls", slog.String("error", err.Error()))
			writeError(w, http.StatusServiceUnavailable, "unavailable", "counting live calls in Redis failed", nil)
			return
		}
		resp.LiveCalls = &n
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *httpAPI) authenticate(next http.Handler) http.Handler {
	if h.opts.Token == "" {
		return next
	}
	want := []byte("Bearer " + h.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="callscribe capacity"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestError is a client mistake, named by field.
type requestError struct{ field, msg string }

func (e *requestError) Error() string { return e.field + " " + e.msg }

func fieldError(field, msg string) error { return &requestError{field: field, msg: msg} }

func writeInvalid(w http.ResponseWriter, err error) {
	var extra map[string]any
	var re *requestError
	if errors.As(err, &re) {
		extra = map[string]any{"field": re.field}
	}
	writeError(w, http.StatusBadRequest, "invalid_request", err.Error(), extra)
}

// decode reads r's JSON body into v, rejecting unknown fields, trailing
// data and bodies over the limit; on failure it has written the answer.
func (h *httpAPI) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json", nil)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("body must hold one JSON object")
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", tooBig.Limit), nil)
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "invalid_request", "request body is empty: want a JSON object", nil)
	case errors.As(err, &typeErr):
		writeError(w, http.StatusBadRequest, "invalid_request",
			fmt.Sprintf("%s must be a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value), map[string]any{"field": typeErr.Field})
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "bad JSON: "+strings.TrimPrefix(err.Error(), "json: "), nil)
	}
	return false
}

func writeError(w http.ResponseWriter, status int, typ, msg string, extra map[string]any) {
	body := map[string]any{}
	for k, v := range extra {
		body[k] = v
	}
	body["type"], body["message"] = typ, msg
	writeJSON(w, status, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// callTranscriber connects a call's transcriber by the agent's configured
// providers: the primary, else a fallback with room, else the primary
// flagged over-limit (holding no lease). The lease is released through
// /v1/leases/release at hang-up.
func (h *httpAPI) callTranscriber(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Agent string `json:"agent"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	callID := r.PathValue("call_id")
	providers, ok := h.opts.Agents[req.Agent]
	if req.Agent == "" || !ok || len(providers.STT) == 0 {
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("agent %q has no transcriber providers configured (capacity.agents)", req.Agent), nil)
		return
	}
	slot := h.leases.ConnectTranscriber(r.Context(), callID, providers)
	resp := struct {
		Provider  string     `json:"provider"`
		Lease     *leaseJSON `json:"lease"`
		OverLimit bool       `json:"over_limit"`
		FellBack  bool       `json:"fell_back"`
	}{Provider: slot.Provider, OverLimit: slot.OverLimit, FellBack: slot.FellBack}
	if slot.Lease.ID != "" {
		h.leases.forget(slot.Lease.ID)
		resp.Lease = toLeaseJSON(slot.Lease)
	}
	writeJSON(w, http.StatusOK, resp)
}
