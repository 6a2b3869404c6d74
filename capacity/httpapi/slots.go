package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// slotJSON is a call slot on the wire. Expires is for the holder's
// information: sent back, it is accepted and ignored (Redis knows the
// slot's expiry).
type slotJSON struct {
	Org       string    `json:"org"`
	Campaign  string    `json:"campaign"`
	ID        string    `json:"id"`
	Uncounted bool      `json:"uncounted"`
	Expires   time.Time `json:"expires,omitzero"`
}

func (h *httpAPI) slot(j *slotJSON) (capacity.Slot, error) {
	if j == nil {
		return capacity.Slot{}, fieldError("slot", "is required")
	}
	if err := checkID("slot.org", j.Org); err != nil {
		return capacity.Slot{}, err
	}
	if j.Campaign != "" {
		if err := checkID("slot.campaign", j.Campaign); err != nil {
			return capacity.Slot{}, err
		}
	}
	if j.Uncounted {
		return h.slots.Restore(j.Org, j.Campaign, "", true), nil
	}
	if j.ID == "" {
		return capacity.Slot{}, fieldError("slot.id", "is required unless the slot is uncounted")
	}
	if err := checkID("slot.id", j.ID); err != nil {
		return capacity.Slot{}, err
	}
	return h.slots.Restore(j.Org, j.Campaign, j.ID, false), nil
}

// checkID is capacity.CheckID as a request error named by field.
func checkID(field, v string) error {
	var ie *capacity.IDError
	if err := capacity.CheckID(field, v); errors.As(err, &ie) {
		return fieldError(field, ie.Reason)
	}
	return nil
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
	err := checkID("org", req.Org)
	switch {
	case err != nil:
	case req.Campaign != "" && checkID("campaign", req.Campaign) != nil:
		err = checkID("campaign", req.Campaign)
	case req.TimeoutMs < 0 || req.TimeoutMs > SlotWaitMax.Milliseconds():
		err = fieldError("timeout_ms", fmt.Sprintf("must be 0–%d", SlotWaitMax.Milliseconds()))
	case req.RetryMs < 0 || req.RetryMs > SlotWaitMax.Milliseconds():
		err = fieldError("retry_ms", fmt.Sprintf("must be 0–%d (0: %d)", SlotWaitMax.Milliseconds(), SlotRetryDefault.Milliseconds()))
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Org) {
		notYours(w, "slots")
		return
	}
	if req.TimeoutMs > 0 {
		select {
		case h.waiters <- struct{}{}:
			defer func() { <-h.waiters }()
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "busy",
				fmt.Sprintf("%d slot requests are already waiting on this server; retry, or ask with timeout_ms 0", cap(h.waiters)), nil)
			return
		}
	}
	retry := time.Duration(req.RetryMs) * time.Millisecond
	if retry == 0 {
		retry = SlotRetryDefault
	}
	wctx, cancel := h.waitCtx(r)
	defer cancel()
	sl, err := h.slots.Acquire(wctx, req.Org, req.Campaign, time.Duration(req.TimeoutMs)*time.Millisecond, retry)
	var noSlot *capacity.NoSlotError
	switch {
	case errors.As(err, &noSlot):
		writeError(w, http.StatusConflict, "no_slot", noSlot.Error(), map[string]any{
			"org": noSlot.Org, "campaign": noSlot.Campaign,
			"org_in_use": noSlot.OrgInUse, "org_limit": noSlot.OrgLimit,
			"campaign_in_use": noSlot.CampaignInUse, "campaign_limit": noSlot.CampaignLimit})
		return
	case err != nil:
		// Only the wait's context ends Acquire otherwise: the client has
		// gone, or the server is shutting down.
		h.waitEnded(w, err)
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
	sl, err := h.slot(req.Slot)
	if err == nil {
		err = checkID("call_id", req.CallID)
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Slot.Org) {
		notYours(w, "slot")
		return
	}
	if err := sl.Bind(r.Context(), req.CallID); err != nil {
		if errors.Is(err, capacity.ErrAlreadyBound) {
			writeError(w, http.StatusConflict, "already_bound", err.Error()+"; this slot was released", map[string]any{"call_id": req.CallID})
			return
		}
		if errors.Is(err, capacity.ErrSlotNotHeld) {
			writeError(w, http.StatusConflict, "slot_not_held", "no live slot of that id for the organisation (and campaign): it was released, went stale, or was never granted", nil)
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
	sl, err := h.slot(req.Slot)
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Slot.Org) {
		notYours(w, "slot")
		return
	}
	_ = sl.Release(r.Context()) // fails open: always nil
	w.WriteHeader(http.StatusNoContent)
}

func (h *httpAPI) callRelease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Org string `json:"org"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	callID := r.PathValue("call_id")
	err := checkID("org", req.Org)
	if err == nil {
		err = checkID("call_id", callID)
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Org) {
		notYours(w, "call bound to a slot")
		return
	}
	// Fails open: an unreachable Redis gives nil. Releasing is
	// idempotent: a call the organisation has not bound (never bound,
	// released already, gone stale, or lost with a wiped Redis) is a
	// 204 that releases nothing. Calls are kept per organisation, so
	// another organisation's call of the same id is never touched, and
	// the answer is the same whether it exists or not.
	if err := h.slots.ReleaseCall(r.Context(), req.Org, callID); err != nil {
		if errors.Is(err, capacity.ErrNotBound) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.opts.Logger.Error("capacity http: releasing a call", slog.String("call_id", callID), slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "internal", "releasing the call failed", nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
