package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/callscribe/callscribe/capacity/live"
)

// GateTicketTTLDefault is Options.GateTicketTTL's default: as long as a
// call slot lives before it goes stale (capacity.StaleAfterDefault).
const GateTicketTTLDefault = 20 * time.Minute

// gateTickets are the admission gate's tickets held by HTTP clients of
// this process. A ticket not given back by POST /v1/gate/leave within the
// TTL is reclaimed by its timer, so a client that dies does not hold its
// place in the gate forever.
type gateTickets struct {
	gate *live.Gate
	ttl  time.Duration
	mu   sync.Mutex
	held map[string]*gateTicket
	// expired counts tickets reclaimed by their TTL.
	expired int64
}

type gateTicket struct {
	release func()
	timer   *time.Timer
	expires time.Time
}

// enter admits one call through the gate, waiting up to timeout, and
// returns its ticket.
func (t *gateTickets) enter(ctx context.Context, timeout time.Duration) (string, time.Time, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("making a gate ticket: %w", err)
	}
	release, err := t.gate.EnterWithin(ctx, timeout)
	if err != nil {
		return "", time.Time{}, err
	}
	id := hex.EncodeToString(b[:])
	tk := &gateTicket{release: release, expires: time.Now().Add(t.ttl).UTC()}
	t.mu.Lock()
	t.held[id] = tk
	tk.timer = time.AfterFunc(t.ttl, func() {
		if t.take(id) != nil {
			t.mu.Lock()
			t.expired++
			t.mu.Unlock()
			release()
		}
	})
	t.mu.Unlock()
	return id, tk.expires, nil
}

// take removes and returns the ticket, nil when unknown or already gone.
func (t *gateTickets) take(id string) *gateTicket {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.held[id]
	delete(t.held, id)
	return tk
}

// leave gives the ticket's place back; false when it is unknown, left or
// expired.
func (t *gateTickets) leave(id string) bool {
	tk := t.take(id)
	if tk == nil {
		return false
	}
	tk.timer.Stop()
	tk.release()
	return true
}

func (h *httpAPI) needGate(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.tickets == nil {
			writeError(w, http.StatusNotImplemented, "gate_disabled", "the admission gate is not enabled on this server", nil)
			return
		}
		fn(w, r)
	}
}

func (h *httpAPI) gateEnter(w http.ResponseWriter, r *http.Request) {
	var req struct {
		// TimeoutMs nil: the gate's configured timeout.
		TimeoutMs *int64 `json:"timeout_ms"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	timeout := h.tickets.gate.Timeout()
	if req.TimeoutMs != nil {
		if *req.TimeoutMs < 0 || *req.TimeoutMs > SlotWaitMax.Milliseconds() {
			writeInvalid(w, fieldError("timeout_ms", fmt.Sprintf("must be 0–%d (omitted: %d)", SlotWaitMax.Milliseconds(), max(timeout, 0).Milliseconds())))
			return
		}
		timeout = time.Duration(*req.TimeoutMs) * time.Millisecond
	}
	release, ok := h.holdWaiter(w, timeout.Milliseconds(), "POST /v1/gate/enter")
	if !ok {
		return
	}
	defer release()
	wctx, cancel := h.waitCtx(r)
	defer cancel()
	ticket, expires, err := h.tickets.enter(wctx, timeout)
	switch {
	case errors.Is(err, live.ErrGateFull):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "gate_full", err.Error(), map[string]any{
			"size": h.tickets.gate.Size(), "in_use": h.tickets.gate.InUse()})
		return
	case err != nil:
		h.waitEnded(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Ticket    string    `json:"ticket"`
		ExpiresAt time.Time `json:"expires_at"`
	}{ticket, expires})
}

func (h *httpAPI) gateLeave(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ticket string `json:"ticket"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	if len(req.Ticket) != 32 {
		writeInvalid(w, fieldError("ticket", "must be the 32-character ticket of POST /v1/gate/enter"))
		return
	}
	if !h.tickets.leave(req.Ticket) {
		writeError(w, http.StatusNotFound, "unknown_ticket", "no ticket of that id in this process: already left, expired (its place was reclaimed), or given by another server process", nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
