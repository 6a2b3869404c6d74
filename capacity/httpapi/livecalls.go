package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/callscribe/callscribe/capacity/live"
)

// Bounds of the live-call routes.
const (
	// DialWaitMax is the longest wait_ms GET /v1/calls/{call_id}/dial
	// accepts: the request holds its connection while the call is queued.
	DialWaitMax = 30 * time.Second
	// dialPollEvery is how often a long-polling GET dial reads the state.
	dialPollEvery = 100 * time.Millisecond
)

func (h *httpAPI) needDialer(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Dialer == nil {
			writeError(w, http.StatusNotImplemented, "dialing_disabled", "the dial queue is not enabled on this server", nil)
			return
		}
		fn(w, r)
	}
}

// isAdmin reports whether the request may read every organisation's
// calls: without authentication, or with an admin token.
func isAdmin(r *http.Request) bool {
	c, ok := r.Context().Value(callerKey{}).(caller)
	return !ok || c.admin
}

// ownedCallID returns the path's call id as Redis knows it: named for the
// organisation whose calls the request reaches (callOrg, ownedID), so that
// another organisation's call of the same id is another call and answers
// 404. On failure (400 naming call_id or org, 404) it has written the
// answer.
func ownedCallID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("call_id")
	if err := checkID("call_id", id); err != nil {
		writeInvalid(w, err)
		return "", false
	}
	org, ok := callOrg(w, r)
	if !ok {
		return "", false
	}
	return ownedID(org, id), true
}

// agentCall decodes {agent} and returns the call of the path's id with
// that agent's providers; on failure it has written the answer. need says
// which providers the route needs: "stt", "tts" or "" (either).
func (h *httpAPI) agentCall(w http.ResponseWriter, r *http.Request, need string) (live.Call, bool) {
	var req struct {
		Agent string `json:"agent"`
	}
	if !h.decode(w, r, &req) {
		return live.Call{}, false
	}
	id, ok := ownedCallID(w, r)
	if !ok {
		return live.Call{}, false
	}
	if req.Agent == "" {
		writeInvalid(w, fieldError("agent", "is required"))
		return live.Call{}, false
	}
	p, known := h.opts.Agents[req.Agent]
	switch {
	case !known:
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("agent %q is not configured (capacity.agents)", req.Agent), map[string]any{"field": "agent"})
		return live.Call{}, false
	case need == "tts" && len(p.TTS) == 0:
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("agent %q has no voice providers configured (capacity.agents)", req.Agent), map[string]any{"field": "agent"})
		return live.Call{}, false
	case need == "" && len(p.TTS) == 0 && len(p.STT) == 0:
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("agent %q has no providers configured (capacity.agents)", req.Agent), map[string]any{"field": "agent"})
		return live.Call{}, false
	}
	return live.Call{ID: id, Agent: req.Agent, Providers: p}, true
}

// voiceStart takes a voice slot for one reply of the call: the agent's
// primary voice, else a fallback with room (those the call has connected
// to first, kept on its timeline in Redis), else (after waiting up to
// live.VoiceWaitDefault) the primary over the limit, holding no lease.
func (h *httpAPI) voiceStart(w http.ResponseWriter, r *http.Request) {
	c, ok := h.agentCall(w, r, "tts")
	if !ok {
		return
	}
	rep := live.NewVoice(h.leases, c.ID, c.Providers.TTS, live.VoiceOptions{Timeline: h.opts.Timeline}).StartReply(r.Context())
	resp := struct {
		Provider  string     `json:"provider"`
		Lease     *leaseJSON `json:"lease"`
		FellBack  bool       `json:"fell_back"`
		OverLimit bool       `json:"over_limit"`
		WaitedMs  int64      `json:"waited_ms"`
	}{Provider: rep.Provider, FellBack: rep.Overflowed, OverLimit: rep.OverLimit, WaitedMs: rep.Waited.Milliseconds()}
	if rep.Lease.ID != "" {
		h.leases.Forget(rep.Lease.ID)
		resp.Lease = toLeaseJSON(rep.Lease)
	}
	writeJSON(w, http.StatusOK, resp)
}

// voiceDone gives a reply's voice slot back.
func (h *httpAPI) voiceDone(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Lease *leaseJSON `json:"lease"`
	}
	if !h.decode(w, r, &req) {
		return
	}
	if _, ok := ownedCallID(w, r); !ok {
		return
	}
	l, err := h.lease(req.Lease, "lease")
	if err == nil && l.Kind != "tts" {
		err = fieldError("lease.kind", `must be "tts": a voice lease`)
	}
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

// dialJSON is a call's dial state on the wire.
type dialJSON struct {
	CallID      string           `json:"call_id"`
	State       string           `json:"state"`
	Agent       string           `json:"agent,omitempty"`
	QueuedAt    *time.Time       `json:"queued_at,omitempty"`
	WaitingFor  string           `json:"waiting_for,omitempty"`
	Position    int              `json:"position,omitempty"`
	Transcriber *transcriberJSON `json:"transcriber,omitempty"`
	Voice       string           `json:"voice,omitempty"`
	// Uncounted: Redis could not be reached; the call may go ahead
	// uncounted (fail open).
	Uncounted bool `json:"uncounted,omitempty"`
}

type transcriberJSON struct {
	Provider  string     `json:"provider"`
	Lease     *leaseJSON `json:"lease"`
	OverLimit bool       `json:"over_limit"`
	FellBack  bool       `json:"fell_back"`
}

func toTranscriberJSON(s live.TranscriberSlot) *transcriberJSON {
	t := &transcriberJSON{Provider: s.Provider, OverLimit: s.OverLimit, FellBack: s.FellBack}
	if s.Lease.ID != "" {
		t.Lease = toLeaseJSON(s.Lease)
	}
	return t
}

func toDialJSON(st live.DialState) dialJSON {
	j := dialJSON{CallID: localID(st.CallID), State: st.State, Agent: st.Call.Agent, Uncounted: st.Uncounted}
	if !st.QueuedAt.IsZero() {
		at := st.QueuedAt.UTC()
		j.QueuedAt = &at
	}
	if st.State == live.DialQueued {
		j.WaitingFor, j.Position = st.WaitingFor, st.Position
		return j
	}
	j.Transcriber, j.Voice = toTranscriberJSON(st.Reservation.Transcriber), st.Reservation.Voice
	return j
}

// writeDial answers a dial state: 202 while queued, else 200.
func writeDial(w http.ResponseWriter, st live.DialState) {
	status := http.StatusOK
	if st.State == live.DialQueued {
		status = http.StatusAccepted
	}
	writeJSON(w, status, toDialJSON(st))
}

// dialStart queues an outbound call, re-checks the queue at once, and
// answers the call's state: 200 reserved (dial it now) or 202 queued.
func (h *httpAPI) dialStart(w http.ResponseWriter, r *http.Request) {
	c, ok := h.agentCall(w, r, "")
	if !ok {
		return
	}
	st := h.opts.Dialer.Dial(r.Context(), c, nil)
	h.forgetDialState(c.ID)
	writeDial(w, st)
}

// dialState answers the call's dial state, waiting up to wait_ms while it
// is queued. Long-polls count against Options.MaxDialWaiters (429 beyond
// it). A read of the state that fails is a grant (fail open) only when
// Redis is down: it refuses connections, or no read of this process has
// succeeded for dialOutageAfter. A read that times out while others
// succeed is load (perhaps our own) and answers 503 busy with Retry-After,
// never a grant. When the server begins to shut down, a long-poll answers
// the state it last read at once.
func (h *httpAPI) dialState(w http.ResponseWriter, r *http.Request) {
	id, ok := ownedCallID(w, r)
	if !ok {
		return
	}
	var wait time.Duration
	if s := r.URL.Query().Get("wait_ms"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > DialWaitMax {
			writeInvalid(w, fieldError("wait_ms", fmt.Sprintf("must be an integer from 0 to %d", DialWaitMax.Milliseconds())))
			return
		}
		wait = time.Duration(ms) * time.Millisecond
	}
	if wait > 0 {
		select {
		case h.dialWaiters <- struct{}{}:
			defer func() { <-h.dialWaiters }()
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "too_many_waiters",
				fmt.Sprintf("%d dial long-polls are already waiting on this server; retry after a second", cap(h.dialWaiters)), nil)
			return
		}
	}
	deadline := time.Now().Add(wait)
	poll := time.NewTimer(0)
	defer poll.Stop()
	<-poll.C
	for {
		st, err := h.readDialState(r.Context(), id, wait > 0)
		switch {
		case errors.Is(err, live.ErrUnknownCall):
			writeError(w, http.StatusNotFound, "not_found", "no dial state for call "+localID(id)+" (never dialled, ended, or expired)", nil)
			return
		case err != nil && h.redisDown(err):
			h.opts.Logger.Warn("capacity http: dial state; Redis is down, failing open", slog.String("error", err.Error()))
			writeJSON(w, http.StatusOK, dialJSON{CallID: localID(id), State: live.DialReserved, Uncounted: true})
			return
		case err != nil:
			h.opts.Logger.Warn("capacity http: dial state; a slow read, not an outage: answering busy", slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "busy", "the call's dial state could not be read in time; it keeps its place: retry", nil)
			return
		}
		h.redisReadOK.Store(time.Now().UnixNano())
		if st.State != live.DialQueued || !time.Now().Add(dialPollEvery).Before(deadline) {
			writeDial(w, st)
			return
		}
		poll.Reset(dialPollEvery)
		select {
		case <-r.Context().Done():
			return
		case <-h.opts.Shutdown: // nil: never
			w.Header().Set("Connection", "close")
			writeDial(w, st)
			return
		case <-poll.C:
		}
	}
}

// dialRead is one read of a call's dial state: done is closed when st and
// err are set, at is when.
type dialRead struct {
	done chan struct{}
	at   time.Time
	st   live.DialState
	err  error
}

// readDialState reads the call's dial state for a GET dial: shared with
// the other long-polls of the call when shared, else fresh.
func (h *httpAPI) readDialState(ctx context.Context, id string, shared bool) (live.DialState, error) {
	if shared {
		return h.sharedDialState(ctx, id)
	}
	return h.opts.Dialer.State(ctx, id)
}

// forgetDialState drops the call's shared read: this process changed the
// call's state (dialled, answered, ended it), so no long-poll may be
// answered with the state before.
func (h *httpAPI) forgetDialState(id string) {
	h.dialReadsMu.Lock()
	delete(h.dialReads, id)
	h.dialReadsMu.Unlock()
}

// sharedDialState reads the call's dial state for a GET dial, sharing the
// read among the requests of the same call in this process: a read in
// flight is waited for, and one finished less than half a poll interval
// ago is answered again, so N long-polls of one call cost one read per
// interval instead of N.
func (h *httpAPI) sharedDialState(ctx context.Context, id string) (live.DialState, error) {
	h.dialReadsMu.Lock()
	if rd, ok := h.dialReads[id]; ok {
		select {
		case <-rd.done:
			if time.Since(rd.at) < dialPollEvery/2 {
				h.dialReadsMu.Unlock()
				return rd.st, rd.err
			}
		default: // in flight: wait for it
			h.dialReadsMu.Unlock()
			select {
			case <-rd.done:
				return rd.st, rd.err
			case <-ctx.Done():
				return live.DialState{}, ctx.Err()
			}
		}
	}
	rd := &dialRead{done: make(chan struct{})}
	h.dialReads[id] = rd
	h.dialReadsMu.Unlock()
	rd.st, rd.err = h.opts.Dialer.State(ctx, id)
	rd.at = time.Now()
	close(rd.done)
	// Forgotten once stale, unless a newer read took its place.
	time.AfterFunc(dialPollEvery, func() {
		h.dialReadsMu.Lock()
		if h.dialReads[id] == rd {
			delete(h.dialReads, id)
		}
		h.dialReadsMu.Unlock()
	})
	return rd.st, rd.err
}

// dialOutageAfter: a dial state read that times out fails open only when
// no read of this process has succeeded for this long.
const dialOutageAfter = 2 * time.Second

// redisDown reports whether err, from reading a dial state, says Redis is
// down rather than slow: it refuses or drops connections (or cannot be
// dialled), or no read of this process has succeeded for dialOutageAfter.
func (h *httpAPI) redisDown(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) {
		return true
	}
	last := h.redisReadOK.Load()
	return last == 0 || time.Since(time.Unix(0, last)) > dialOutageAfter
}

// callAnswered hands the call's reserved transcriber over to it.
func (h *httpAPI) callAnswered(w http.ResponseWriter, r *http.Request) {
	id, ok := ownedCallID(w, r)
	if !ok {
		return
	}
	slot, ok := h.opts.Dialer.Answered(r.Context(), id)
	h.forgetDialState(id)
	if ok {
		writeJSON(w, http.StatusOK, map[string]any{"call_id": localID(id), "state": live.DialAnswered, "transcriber": toTranscriberJSON(slot)})
		return
	}
	st, err := h.opts.Dialer.State(r.Context(), id)
	switch {
	case errors.Is(err, live.ErrUnknownCall):
		writeError(w, http.StatusNotFound, "not_found", "nothing is reserved for call "+localID(id)+" (never dialled, ended, or expired)", nil)
	case err != nil: // Redis down: fail open
		writeJSON(w, http.StatusOK, map[string]any{"call_id": localID(id), "state": live.DialAnswered, "transcriber": nil, "uncounted": true})
	default:
		writeError(w, http.StatusConflict, "not_reserved", fmt.Sprintf("call %s is %s, not reserved: wait until GET /v1/calls/%s/dial says reserved", localID(id), st.State, localID(id)), nil)
	}
}

// callEnded releases what is held for the call, drops it from the queue,
// and re-checks the queue.
func (h *httpAPI) callEnded(w http.ResponseWriter, r *http.Request) {
	id, ok := ownedCallID(w, r)
	if !ok {
		return
	}
	h.opts.Dialer.CallEnded(r.Context(), id)
	h.forgetDialState(id)
	w.WriteHeader(http.StatusNoContent)
}

type eventJSON struct {
	CallID   string    `json:"call_id,omitempty"`
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Provider string    `json:"provider"`
	Detail   string    `json:"detail"`
}

// callTimeline answers the call's timeline events, oldest first.
func (h *httpAPI) callTimeline(w http.ResponseWriter, r *http.Request) {
	id, ok := ownedCallID(w, r)
	if !ok {
		return
	}
	if h.opts.Timeline == nil {
		writeError(w, http.StatusNotImplemented, "timeline_disabled", "call timelines are not enabled on this server", nil)
		return
	}
	events, err := h.opts.Timeline.Events(r.Context(), id)
	if err != nil {
		h.opts.Logger.Warn("capacity http: timeline", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "unavailable", "reading the call's timeline from Redis failed", nil)
		return
	}
	if len(events) == 0 { // never recorded, expired, or another organisation's
		writeError(w, http.StatusNotFound, "not_found", "no timeline for call "+localID(id)+" (nothing recorded, or expired)", nil)
		return
	}
	resp := struct {
		CallID string      `json:"call_id"`
		Events []eventJSON `json:"events"`
	}{CallID: localID(id), Events: make([]eventJSON, 0, len(events))}
	for _, e := range events {
		resp.Events = append(resp.Events, eventJSON{At: e.At, Kind: e.Kind, Provider: e.Provider, Detail: e.Detail})
	}
	writeJSON(w, http.StatusOK, resp)
}

// dialQueue answers the calls waiting to be dialled, oldest first. Only an
// admin reads it: it holds every organisation's calls.
func (h *httpAPI) dialQueue(w http.ResponseWriter, r *http.Request) {
	if !isAdmin(r) {
		writeError(w, http.StatusForbidden, "forbidden", "the dial queue is for admin tokens only", nil)
		return
	}
	queued, err := h.opts.Dialer.Queued(r.Context())
	if err != nil {
		h.opts.Logger.Warn("capacity http: dial queue", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "unavailable", "reading the dial queue from Redis failed", nil)
		return
	}
	type call struct {
		Org        string    `json:"org,omitempty"`
		CallID     string    `json:"call_id"`
		Agent      string    `json:"agent"`
		QueuedAt   time.Time `json:"queued_at"`
		WaitingFor string    `json:"waiting_for"`
		Position   int       `json:"position"`
	}
	resp := struct {
		Calls []call `json:"calls"`
	}{Calls: make([]call, 0, len(queued))}
	for _, q := range queued {
		org, _, _ := strings.Cut(q.Call.ID, "/")
		if org == q.Call.ID {
			org = ""
		}
		resp.Calls = append(resp.Calls, call{Org: org, CallID: localID(q.Call.ID), Agent: q.Call.Agent, QueuedAt: q.QueuedAt, WaitingFor: q.WaitingFor, Position: q.Position})
	}
	writeJSON(w, http.StatusOK, resp)
}
