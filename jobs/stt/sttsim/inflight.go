package sttsim

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// incoming is a submission (single or batch) read as far as its scope,
// before Latency.
type incoming struct {
	scope    Scope
	key      string // the Idempotency-Key; a batch's manifest key
	batch    bool
	admitted string // the raw X-Admitted-At
	// handle accepts or replays the submission once admit let it through.
	handle func(ctx context.Context) reply
}

// slot is a submission's place in its scope's in-flight count, taken by
// enter.
type slot struct {
	scope Scope
	held  bool // counted until finish or leave
	over  bool // the scope was full when it arrived: refuse it (see admit)
}

// routeSubmission wraps a submission route: authentication; then read,
// which answers early (400) or names the scope; then the in-flight count
// (enter); then Latency, so that the wait counts as in flight; then admit
// (cooldown, in-flight limit, trouble), the handling and finish, which
// gives the slot back before the answer is written. A 401 or an early
// answer waits Latency too, and holds no slot.
func (s *Server) routeSubmission(read func(r *http.Request, apiKey string) (incoming, *reply)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var (
			in    incoming
			early *reply
		)
		if key, ok := s.authenticate(r); ok {
			in, early = read(r, key)
		} else {
			rep := unauthorized()
			early = &rep
		}
		var sl slot
		if early == nil {
			sl = s.enter(in.scope)
			if s.cfg.DecideOnReceipt {
				s.decideOnReceipt(w, r, in, sl)
				return
			}
		}
		if !s.delay(r.Context()) {
			s.leave(sl)
			s.cancelled()
			return
		}
		var rep reply
		if early != nil {
			rep = *early
		} else {
			arrival, refusal := s.admit(in.scope, in.key, in.batch, in.admitted, sl.over)
			if refusal != nil {
				rep = *refusal
			} else {
				rep = in.handle(r.Context())
			}
			s.finish(arrival, sl, rep)
		}
		s.respond(w, r, rep)
	})
}

// decideOnReceipt is the rest of a submission under
// Config.DecideOnReceipt: admit at once; a refusal is answered without
// Latency; accepted work waits Latency, then is handled.
func (s *Server) decideOnReceipt(w http.ResponseWriter, r *http.Request, in incoming, sl slot) {
	arrival, refusal := s.admit(in.scope, in.key, in.batch, in.admitted, sl.over)
	if refusal != nil {
		s.finish(arrival, sl, *refusal)
		s.respond(w, r, *refusal)
		return
	}
	if !s.delay(r.Context()) {
		s.finish(arrival, sl, reply{abandoned: true})
		s.cancelled()
		return
	}
	rep := in.handle(r.Context())
	s.finish(arrival, sl, rep)
	s.respond(w, r, rep)
}

// enter counts a submission of scope that has just arrived. When the scope
// already has Config.MaxInFlight in flight, the submission takes no slot
// and is marked over, for admit to refuse; otherwise it holds a slot until
// finish or leave, and the scope's peak is updated.
func (s *Server) enter(scope Scope) slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.inFlightLocked(scope, s.now())
	if s.cfg.MaxInFlight > 0 && n >= s.cfg.MaxInFlight {
		return slot{scope: scope, over: true}
	}
	s.handling[scope]++
	if n+1 > s.st.MaxInFlightSeen[scope] {
		s.st.MaxInFlightSeen[scope] = n + 1
	}
	return slot{scope: scope, held: true}
}

// leave gives back sl's slot, if it holds one, for a submission whose
// client went away during Latency.
func (s *Server) leave(sl slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(sl, time.Time{}, s.now())
}

// releaseLocked gives back sl's slot and, when pendingUntil is after now,
// keeps the asynchronous work it accepted in flight until then, in the
// same critical section: the count never dips nor doubles in between.
// Callers hold mu.
func (s *Server) releaseLocked(sl slot, pendingUntil, now time.Time) {
	if sl.held {
		if s.handling[sl.scope]--; s.handling[sl.scope] == 0 {
			delete(s.handling, sl.scope)
		}
	}
	if now.Before(pendingUntil) {
		s.pending[sl.scope] = append(s.pending[sl.scope], pendingUntil)
	}
}

// inFlightLocked is scope's in-flight count at now: the submissions being
// handled that hold a slot, and the asynchronous work not yet ready, which
// it forgets once ready. Callers hold mu.
func (s *Server) inFlightLocked(scope Scope, now time.Time) int {
	if p, ok := s.pending[scope]; ok {
		p = slices.DeleteFunc(p, func(ready time.Time) bool { return !now.Before(ready) })
		if len(p) == 0 {
			delete(s.pending, scope)
		} else {
			s.pending[scope] = p
		}
	}
	return s.handling[scope] + len(s.pending[scope])
}

// inFlightAllLocked is the in-flight count of every scope that has any at
// now. Callers hold mu.
func (s *Server) inFlightAllLocked(now time.Time) map[Scope]int {
	out := map[Scope]int{}
	for scope := range s.handling {
		out[scope] = 0
	}
	for scope := range s.pending {
		out[scope] = 0
	}
	for scope := range out {
		if n := s.inFlightLocked(scope, now); n > 0 {
			out[scope] = n
		} else {
			delete(out, scope)
		}
	}
	return out
}
