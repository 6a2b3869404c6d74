package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// slotJSON is a call slot on the wire; Expires is needed back by bind.
type slotJSON struct {
	Org       string    `json:"org"`
	Campaign  string    `json:"campaign"`
	ID        string    `json:"id"`
	Uncounted bool      `json:"uncounted"`
	Expires   time.Time `json:"expires,omitzero"`
}

func (h *httpAPI) slot(j *slotJSON, needExpiry bool) (capacity.Slot, error) {
	switch {
	case j == nil:
		return capacity.Slot{}, fieldError("slot", "is required")
	case j.Org == "":
		return capacity.Slot{}, fieldError("slot.org", "is required")
	case j.Uncounted:
		return h.slots.Restore(j.Org, j.Campaign, "", time.Time{}, true), nil
	case j.ID == "":
		return capacity.Slot{}, fieldError("slot.id", "is required unless the slot is uncounted")
	case needExpiry && j.Expires.IsZero():
		return capacity.Slot{}, fieldError("slot.expires", "is required to bind a counted slot")
	}
	return h.slots.Restore(j.Org, j.Campaign, j.ID, j.Expires, false), nil
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
	case req.TimeoutMs < 0 || req.TimeoutMs > SlotWaitMax.Milliseconds():
		err = fieldError("timeout_ms", fmt.Sprintf("must be 0–%d", SlotWaitMax.Milliseconds()))
	case req.RetryMs < 0 || req.RetryMs > SlotWaitMax.Milliseconds():
		err = fieldError("retry_ms", fmt.Sprintf("must be 0–%d (0: %d)", SlotWaitMax.Milliseconds(), capacity.RetryIntervalDefault.Milliseconds()))
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	sl, err := h.slots.Acquire(r.Context(), req.Org, req.Campaign,
		time.Duration(req.TimeoutMs)*time.Millisecond, time.Duration(req.RetryMs)*time.Millisecond)
	var noSlot *capacity.NoSlotError
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
	if exp := sl.Expires(); !exp.IsZero() {
		out.Expires = exp.UTC()
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
		if errors.Is(err, capacity.ErrAlreadyBound) {
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
