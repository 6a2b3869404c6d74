package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/idtext"
	"github.com/callscribe/callscribe/internal/lane"
)

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

func toLeaseJSON(l capacity.Lease) *leaseJSON {
	counted := l.Counted()
	return &leaseJSON{ID: l.ID, Provider: l.Provider, Kind: l.Kind, Holder: l.Holder, Expires: l.Expires.UTC(), Counted: &counted}
}

// lease rebuilds the Lease a client sends back (Leases.Restore: a lease
// claiming to be counted for a provider/kind with no configured limit
// cannot be in Redis, so it is treated as uncounted).
func (h *httpAPI) lease(j *leaseJSON, field string) (capacity.Lease, error) {
	if j == nil {
		return capacity.Lease{}, fieldError(field, "is required")
	}
	if err := checkProviderKind(j.Provider, j.Kind, field+"."); err != nil {
		return capacity.Lease{}, err
	}
	if j.ID == "" {
		return capacity.Lease{}, fieldError(field+".id", "is required")
	}
	counted := j.Counted == nil || *j.Counted
	return h.leases.Restore(capacity.Lease{ID: j.ID, Provider: j.Provider, Kind: j.Kind, Holder: j.Holder, Expires: j.Expires}, counted), nil
}

func checkProviderKind(provider, kind, prefix string) error {
	if provider == "" {
		return fieldError(prefix+"provider", "is required")
	}
	if strings.ContainsAny(provider, "{}") {
		return fieldError(prefix+"provider", "must not contain braces")
	}
	if p := idtext.Problem(provider); p != "" {
		return fieldError(prefix+"provider", p)
	}
	if kind != capacity.KindSTT && kind != capacity.KindTTS {
		return fieldError(prefix+"kind", fmt.Sprintf("must be %q or %q", capacity.KindSTT, capacity.KindTTS))
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
	var reqLane capacity.Lane
	err := checkProviderKind(req.Provider, req.Kind, "")
	switch {
	case err != nil:
	case checkID("holder", req.Holder) != nil:
		err = checkID("holder", req.Holder)
	case req.Lane == "live":
		reqLane = lane.Live
	case req.Lane == "batch":
		reqLane = lane.Batch
	default:
		err = fieldError("lane", `must be "live" or "batch"`)
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	// An organisation's lease is named for it (holder "org/holder", id
	// "org/holder#…") and counted against its quota.
	org := orgOf(r)
	lease, g := h.leases.Acquire(r.Context(), capacity.Request{Provider: req.Provider, Kind: req.Kind,
		Holder: ownedID(org, req.Holder), Lane: reqLane, Owner: org, OwnerShare: h.opts.OrgLeaseShare})
	resp := struct {
		Granted   bool       `json:"granted"`
		Lease     *leaseJSON `json:"lease"`
		InUse     int        `json:"in_use"`
		Limit     int        `json:"limit"`
		Uncounted bool       `json:"uncounted"`
		// OrgInUse and OrgQuota: for an organisation's token, its leases
		// of the provider/kind and its quota; OverQuota: refused by that
		// quota, not by the limit.
		OrgInUse  int  `json:"org_in_use,omitempty"`
		OrgQuota  int  `json:"org_quota,omitempty"`
		OverQuota bool `json:"over_quota,omitempty"`
	}{Granted: g.Granted, InUse: g.InUse, Limit: g.Limit, Uncounted: g.Uncounted,
		OrgInUse: g.OwnerInUse, OrgQuota: g.OwnerQuota, OverQuota: g.OverQuota}
	if g.Granted {
		h.leases.Forget(lease.ID)
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
	held := make([]capacity.Lease, 0, len(req.Leases))
	for i, j := range req.Leases {
		field := fmt.Sprintf("leases[%d]", i)
		l, err := h.lease(j, field)
		if err != nil {
			writeInvalid(w, err)
			return
		}
		if !ownsLease(r, l.ID) {
			notYourLease(w, field)
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
	if !ownsLease(r, l.ID) {
		notYourLease(w, "lease")
		return
	}
	h.leases.Release(r.Context(), l)
	w.WriteHeader(http.StatusNoContent)
}

// notYourLease answers a lease of another organisation as if it did not
// exist, touching nothing.
func notYourLease(w http.ResponseWriter, field string) {
	writeError(w, http.StatusNotFound, "not_found", "the organisation holds no lease of that id", map[string]any{"field": field + ".id"})
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
	callID, ok := ownedCallID(w, r)
	if !ok {
		return // it becomes the lease's holder
	}
	providers, ok := h.opts.Agents[req.Agent]
	if req.Agent == "" || !ok || len(providers.STT) == 0 {
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("agent %q has no transcriber providers configured (capacity.agents)", req.Agent), nil)
		return
	}
	slot := live.ConnectTranscriberWithTimeline(r.Context(), h.leases, h.opts.Timeline, callID, providers)
	resp := struct {
		Provider  string     `json:"provider"`
		Lease     *leaseJSON `json:"lease"`
		OverLimit bool       `json:"over_limit"`
		FellBack  bool       `json:"fell_back"`
	}{Provider: slot.Provider, OverLimit: slot.OverLimit, FellBack: slot.FellBack}
	if slot.Lease.ID != "" {
		h.leases.Forget(slot.Lease.ID)
		resp.Lease = toLeaseJSON(slot.Lease)
	}
	writeJSON(w, http.StatusOK, resp)
}
