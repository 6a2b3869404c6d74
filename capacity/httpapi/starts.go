package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/callscribe/callscribe/capacity/live"
)

func (h *httpAPI) needStarts(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Starts == nil {
			writeError(w, http.StatusNotImplemented, "starts_disabled", "the call start rate is not enabled on this server", nil)
			return
		}
		fn(w, r)
	}
}

// holdWaiter takes a waiter token when timeoutMs > 0; false: it has
// answered 503 busy.
func (h *httpAPI) holdWaiter(w http.ResponseWriter, timeoutMs int64, what string) (release func(), ok bool) {
	if timeoutMs <= 0 {
		return func() {}, true
	}
	select {
	case h.waiters <- struct{}{}:
		return func() { <-h.waiters }, true
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "busy",
			fmt.Sprintf("%d requests are already waiting on this server; retry, or ask %s with timeout_ms 0", cap(h.waiters), what), nil)
		return nil, false
	}
}

// callStart takes a start token of the campaign's start rate and its
// organisation's (live.RateLimiter); a 429 names the refusing limit.
func (h *httpAPI) callStart(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Org       string `json:"org"`
		Campaign  string `json:"campaign"`
		TimeoutMs int64  `json:"timeout_ms"`
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
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	if !mayAct(r, req.Org) {
		notYours(w, "campaigns")
		return
	}
	release, ok := h.holdWaiter(w, req.TimeoutMs, "POST /v1/calls:start")
	if !ok {
		return
	}
	defer release()
	start := time.Now()
	wctx, cancel := h.waitCtx(r)
	defer cancel()
	uncounted, err := h.opts.Starts.Take(wctx, req.Org, req.Campaign, time.Duration(req.TimeoutMs)*time.Millisecond)
	var rl *live.RateLimitedError
	switch {
	case errors.As(err, &rl):
		// Whole seconds, rounded up (RFC 9110 delay-seconds).
		secs := max(int64((rl.RetryAfter+time.Second-1)/time.Second), 1)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeError(w, http.StatusTooManyRequests, "rate_limited", rl.Error(), map[string]any{
			"org": rl.Org, "campaign": rl.Campaign, "limited_by": rl.LimitedBy, "limit": rl.Limit, "retry_after_ms": rl.RetryAfter.Milliseconds()})
		return
	case err != nil:
		// Only the wait's context ends Wait otherwise: the client has gone,
		// or the server is shutting down.
		h.waitEnded(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Started   bool  `json:"started"`
		WaitedMs  int64 `json:"waited_ms"`
		Uncounted bool  `json:"uncounted"`
	}{true, time.Since(start).Milliseconds(), uncounted})
}
