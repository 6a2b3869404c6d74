package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// Bounds of POST /v1/providers/{provider}/{kind}/refusals.
const (
	// RefusalInUseMax is the largest in_use a refusal report accepts.
	RefusalInUseMax = 1_000_000
	// RefusalReportEveryDefault is Options.RefusalReportEvery's default:
	// an organisation's token reports a refusal of one provider/kind at
	// most once a second per server process.
	RefusalReportEveryDefault = time.Second
	// refusalReportersMax bounds the entries of the reporting
	// organisations' last reports kept per process; past it the stale
	// ones are dropped.
	refusalReportersMax = 4096
)

// refusalPace remembers, per organisation and provider/kind, when this
// process last took a refusal report, so that one organisation's token
// reports at most once per Options.RefusalReportEvery.
type refusalPace struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time
}

// take records a report of key at now, or returns how long until the
// next one is taken.
func (p *refusalPace) take(key string, now time.Time) (wait time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, seen := p.last[key]; seen && now.Sub(at) < p.every {
		return p.every - now.Sub(at), false
	}
	if len(p.last) >= refusalReportersMax {
		for k, at := range p.last {
			if now.Sub(at) >= p.every {
				delete(p.last, k)
			}
		}
	}
	p.last[key] = now
	return 0, true
}

// refusalReport answers POST /v1/providers/{provider}/{kind}/refusals: a
// live-call runtime says the vendor refused a stream while in_use leases
// of provider/kind were held (the refused stream's own included). Below
// the limit in force the limit is lowered to in_use − 1 (never below
// capacity.LearnedLimitFloor), platform-wide, and an alert raised; at or
// above it nothing changes. Nothing here raises a limit.
//
// Vendor limits are platform-wide, so any authenticated caller may
// report. An admin token's report (or one to a server without
// authentication) is taken as given. An organisation's token is a
// tenant's word about a limit every organisation shares, so its report
// is judged by no fewer leases than Redis holds live of provider/kind
// (capacity.RefusalReport.AtLeastCounted: it cannot teach a limit below
// the usage Redis counts), it is named in the limit event, the alert and
// the log, and it is taken at most once per Options.RefusalReportEvery
// per provider/kind and process (429 rate_limited sooner).
func (h *httpAPI) refusalReport(w http.ResponseWriter, r *http.Request) {
	provider, kind := r.PathValue("provider"), r.PathValue("kind")
	if err := checkProviderKind(provider, kind, ""); err != nil {
		writeInvalid(w, err)
		return
	}
	var req struct {
		InUse *int64 `json:"in_use"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	switch {
	case req.InUse == nil:
		writeInvalid(w, fieldError("in_use", "is required: the leases of the provider/kind held when the vendor refused, the refused stream's own included"))
		return
	case *req.InUse < 1 || *req.InUse > RefusalInUseMax:
		writeInvalid(w, fieldError("in_use", fmt.Sprintf("must be 1–%d (the refused stream's own lease included), got %d", RefusalInUseMax, *req.InUse)))
		return
	}
	if _, ok := h.leases.Configured(provider, kind); !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no limit is configured for %s/%s (capacity.limits): its streams are not counted", provider, kind),
			map[string]any{"provider": provider, "kind": kind})
		return
	}
	org := orgOf(r)
	if org != "" {
		if wait, ok := h.refusals.take(org+"\x00"+provider+"/"+kind, time.Now()); !ok {
			secs := max(int64((wait+time.Second-1)/time.Second), 1)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			writeError(w, http.StatusTooManyRequests, "rate_limited",
				fmt.Sprintf("the organisation reported a refusal of %s/%s less than %s ago; this one was not taken", provider, kind, h.refusals.every),
				map[string]any{"provider": provider, "kind": kind, "retry_after_ms": wait.Milliseconds()})
			return
		}
	}
	res := h.leases.Refused(r.Context(), capacity.RefusalReport{Provider: provider, Kind: kind, InUse: int(*req.InUse),
		Reporter: org, AtLeastCounted: org != ""})
	resp := struct {
		Provider string `json:"provider"`
		Kind     string `json:"kind"`
		// ReportedInUse is the request's; InUse is what the limit was
		// judged by (an organisation's report: at least Redis's count).
		ReportedInUse   int  `json:"reported_in_use"`
		InUse           int  `json:"in_use"`
		ConfiguredLimit int  `json:"configured_limit"`
		LimitBefore     *int `json:"limit_before"`
		LimitAfter      *int `json:"limit_after"`
		Lowered         bool `json:"lowered"`
		// Failed: Redis could not be reached; nothing changed and the
		// limits are not known (null). Report again later.
		Failed bool `json:"failed"`
	}{Provider: provider, Kind: kind, ReportedInUse: int(*req.InUse), InUse: res.InUse, ConfiguredLimit: res.ConfiguredLimit,
		Lowered: res.Lowered, Failed: res.Failed}
	if !res.Failed {
		resp.LimitBefore, resp.LimitAfter = &res.Before, &res.After
	}
	writeJSON(w, http.StatusOK, resp)
}
