package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// callerIDJSON is a caller ID granted to a call.
type callerIDJSON struct {
	Org       string    `json:"org"`
	Number    string    `json:"number"`
	Token     string    `json:"token"`
	CallID    string    `json:"call_id"`
	BusySince time.Time `json:"busy_since"`
}

func (h *httpAPI) needCallerIDs(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.CallerIDs == nil {
			writeError(w, http.StatusNotImplemented, "caller_ids_disabled", "caller-ID pools are not enabled on this server", nil)
			return
		}
		fn(w, r)
	}
}

// checkNumber is capacity.CheckNumber as a request error named by field.
func checkNumber(field, v string) error {
	var ne *capacity.NumberError
	if err := capacity.CheckNumber(field, v); errors.As(err, &ne) {
		if ne.Value == "" {
			return fieldError(field, ne.Reason)
		}
		return fieldError(field, fmt.Sprintf("%q %s", ne.Value, ne.Reason))
	}
	return nil
}

// callerIDsUnavailable answers an acquire or a list while Redis cannot be
// reached: a caller ID cannot be invented, so the runtime dials with its
// default number (or retries after Retry-After).
func callerIDsUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "caller_ids_unavailable",
		"the caller-ID pool cannot be reached now: dial with the default number, or retry", nil)
}

func (h *httpAPI) callerIDAcquire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Org    string `json:"org"`
		CallID string `json:"call_id"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	err := checkID("org", req.Org)
	if err == nil {
		err = checkID("call_id", req.CallID)
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Org) {
		notYours(w, "caller-ID pool")
		return
	}
	cid, err := h.opts.CallerIDs.Acquire(r.Context(), req.Org, req.CallID)
	var none *capacity.NoCallerIDError
	switch {
	case errors.As(err, &none):
		writeError(w, http.StatusConflict, "no_caller_id", none.Error(), map[string]any{
			"org": none.Org, "busy": none.Busy, "total": none.Total})
		return
	case err != nil:
		// Only an unreachable Redis (or a client that went away).
		callerIDsUnavailable(w)
		return
	}
	writeJSON(w, http.StatusOK, callerIDJSON{Org: cid.Org, Number: cid.Number, Token: cid.Token, CallID: cid.CallID, BusySince: cid.Since.UTC()})
}

func (h *httpAPI) callerIDRelease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Org    string `json:"org"`
		Number string `json:"number"`
		Token  string `json:"token"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	err := checkID("org", req.Org)
	if err == nil {
		err = checkNumber("number", req.Number)
	}
	if err == nil {
		err = checkID("token", req.Token)
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Org) {
		notYours(w, "caller-ID pool")
		return
	}
	// Idempotent, and a stale token frees nothing; with Redis down the
	// number lapses after the timeout. Either way there is nothing more
	// the caller can do.
	if _, err := h.opts.CallerIDs.Release(r.Context(), req.Org, req.Number, req.Token); err != nil {
		h.opts.Logger.Error("capacity http: releasing a caller ID", slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "internal", "releasing the caller ID failed", nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *httpAPI) callerIDList(w http.ResponseWriter, r *http.Request) {
	org := r.URL.Query().Get("org")
	if err := checkID("org", org); err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, org) {
		notYours(w, "caller-ID pool")
		return
	}
	list, err := h.opts.CallerIDs.List(r.Context(), org)
	if err != nil {
		h.opts.Logger.Warn("capacity http: listing caller IDs", slog.String("org", org), slog.String("error", err.Error()))
		callerIDsUnavailable(w)
		return
	}
	out := struct {
		Org     string                   `json:"org"`
		Free    int                      `json:"free"`
		Busy    int                      `json:"busy"`
		Stale   int                      `json:"stale"`
		Numbers []capacity.CallerIDState `json:"numbers"`
	}{Org: org, Numbers: list}
	for _, s := range list {
		switch s.State {
		case capacity.CallerIDFree:
			out.Free++
		case capacity.CallerIDBusy:
			out.Busy++
		case capacity.CallerIDStale:
			out.Stale++
		}
	}
	writeJSON(w, http.StatusOK, out)
}
