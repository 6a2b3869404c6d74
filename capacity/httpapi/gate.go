package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/callscribe/callscribe/capacity/live"
)

func (h *httpAPI) needGate(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Gate == nil {
			writeError(w, http.StatusNotImplemented, "gate_disabled", "the admission gate is not enabled on this server", nil)
			return
		}
		fn(w, r)
	}
}

// gateEnter admits one call through the shared admission gate, waiting
// up to timeout_ms, and answers its ticket.
func (h *httpAPI) gateEnter(w http.ResponseWriter, r *http.Request) {
	var req struct {
		// TimeoutMs nil: the gate's configured timeout.
		TimeoutMs *int64 `json:"timeout_ms"`
		// CallID: the call's id, for the logs ("": none).
		CallID string `json:"call_id"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	gate := h.opts.Gate
	timeout := gate.Timeout()
	if req.TimeoutMs != nil {
		if *req.TimeoutMs < 0 || *req.TimeoutMs > SlotWaitMax.Milliseconds() {
			writeInvalid(w, fieldError("timeout_ms", fmt.Sprintf("must be 0–%d (omitted: %d)", SlotWaitMax.Milliseconds(), max(timeout, 0).Milliseconds())))
			return
		}
		timeout = time.Duration(*req.TimeoutMs) * time.Millisecond
	}
	if req.CallID != "" {
		if err := checkID("call_id", req.CallID); err != nil {
			writeInvalid(w, err)
			return
		}
	}
	release, ok := h.holdWaiter(w, timeout.Milliseconds(), "POST /v1/gate/enter")
	if !ok {
		return
	}
	defer release()
	wctx, cancel := h.waitCtx(r)
	defer cancel()
	ticket, err := gate.EnterWithin(wctx, orgOf(r), req.CallID, timeout)
	var full *live.GateFullError
	switch {
	case errors.As(err, &full):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "gate_full", err.Error(), map[string]any{
			"size": full.Size, "in_use": full.InUse, "waited_ms": full.Waited.Milliseconds()})
		return
	case err != nil:
		h.waitEnded(w, err)
		return
	}
	var expires *time.Time
	if !ticket.Uncounted {
		expires = &ticket.ExpiresAt
	}
	writeJSON(w, http.StatusOK, struct {
		Ticket    string     `json:"ticket"`
		CallID    string     `json:"call_id,omitempty"`
		ExpiresAt *time.Time `json:"expires_at,omitempty"`
		WaitedMs  int64      `json:"waited_ms"`
		InUse     int        `json:"in_use"`
		Size      int        `json:"size"`
		Uncounted bool       `json:"uncounted"`
	}{ticket.ID, ticket.CallID, expires, ticket.Waited.Milliseconds(), ticket.InUse, gate.Size(), ticket.Uncounted})
}

// gateLeave gives a ticket's place back; any serve process sharing the
// gate may be asked.
func (h *httpAPI) gateLeave(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ticket string `json:"ticket"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	if !validTicket(req.Ticket) {
		writeInvalid(w, fieldError("ticket", "must be the 32-character ticket of POST /v1/gate/enter"))
		return
	}
	if !h.opts.Gate.LeaveTicket(r.Context(), orgOf(r), req.Ticket) {
		writeError(w, http.StatusNotFound, "unknown_ticket", "no live ticket of that id for the caller: already left, expired (its place was reclaimed), or another organisation's", nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// validTicket reports whether s is a ticket's form: 32 lowercase hex
// characters, or live.UncountedTicketPrefix and the hex that fill 32.
func validTicket(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range strings.TrimPrefix(s, live.UncountedTicketPrefix) {
		if ('0' > c || c > '9') && ('a' > c || c > 'f') {
			return false
		}
	}
	return true
}
