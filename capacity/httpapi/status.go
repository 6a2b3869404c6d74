package httpapi

import (
	"log/slog"
	"net/http"
	"time"
)

// status answers GET /v1/status. Its counters are scoped to the caller:
// an admin token (or a server without authentication) sees the
// platform's (every provider's leases, every organisation's live calls,
// the 401s this process refused); an organisation's token sees only what
// counts its own requests: its organisation's live calls. Provider
// leases and auth_failures count every organisation's requests (and every
// stranger's), so they are not shown to one organisation.
func (h *httpAPI) status(w http.ResponseWriter, r *http.Request) {
	c, authed := r.Context().Value(callerKey{}).(caller)
	if authed && !c.admin {
		h.orgStatus(w, r, c.org)
		return
	}
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
		// AuthFailures counts the requests this process refused with 401.
		AuthFailures uint64 `json:"auth_failures"`
	}{Providers: make([]provider, 0, len(st)), AuthFailures: h.authFailures.Load()}
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

// orgStatus is GET /v1/status for organisation org's token: {org,
// live_calls} (live_calls absent when call slots are not enabled).
func (h *httpAPI) orgStatus(w http.ResponseWriter, r *http.Request, org string) {
	resp := struct {
		Org string `json:"org"`
		// LiveCalls: the organisation's own live calls.
		LiveCalls *int `json:"live_calls,omitempty"`
	}{Org: org}
	if h.slots != nil {
		n, err := h.slots.OrgLiveCalls(r.Context(), org)
		if err != nil {
			h.opts.Logger.Warn("capacity http: live calls", slog.String("org", org), slog.String("error", err.Error()))
			writeError(w, http.StatusServiceUnavailable, "unavailable", "counting live calls in Redis failed", nil)
			return
		}
		resp.LiveCalls = &n
	}
	writeJSON(w, http.StatusOK, resp)
}
