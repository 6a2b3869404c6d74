package crmsim

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// Arrival is one request to POST /v1/action-sets that was handled (not
// cancelled during Latency).
type Arrival struct {
	Key     string // the Idempotency-Key header, "" when absent
	Attempt int    // the X-Delivery-Attempt header; 0 when absent or not a number
	At      time.Time
	Status  int  // the status answered; 0 when the connection was dropped
	Dropped bool // applied, then the connection was reset
}

// Stats is a snapshot of what a Server saw and did. It is a copy: holding
// it does not block the Server, and the Server does not change it.
type Stats struct {
	// Deliveries counts requests to POST /v1/action-sets (after Latency),
	// whatever they were answered.
	Deliveries int
	// Applied counts distinct keys applied: action sets now in the CRM.
	Applied int
	// Replays counts 200 answers: a key applied before, with the same body.
	Replays int
	// Conflicts counts 409 idempotency_key_reused answers.
	Conflicts int
	// RateLimited counts 429 answers; Cooldowns the cooldowns they started.
	RateLimited int
	Cooldowns   int
	// ServerErrors counts 500, 502, 503 and 504 answers.
	ServerErrors int
	// Drops counts applied sets answered with a reset connection.
	Drops int
	// Unauthorized counts 401 answers; Invalid 400 and 422 answers.
	Unauthorized int
	Invalid      int
	// Cancelled counts requests whose sender went away during Latency.
	Cancelled int

	// ApplyCount is, per key, how many times the key was applied. A CRM
	// that keeps the protocol's promise never makes one exceed 1.
	ApplyCount map[string]int
	// Bodies is, per key, the body as first applied, byte for byte.
	Bodies map[string]json.RawMessage
	// Arrivals lists every delivery in the order they were answered.
	Arrivals []Arrival
}

// clone is a deep copy of s.
func (s *Stats) clone() Stats {
	c := *s
	c.ApplyCount = maps.Clone(s.ApplyCount)
	c.Bodies = make(map[string]json.RawMessage, len(s.Bodies))
	for k, v := range s.Bodies {
		c.Bodies[k] = bytes.Clone(v)
	}
	c.Arrivals = slices.Clone(s.Arrivals)
	return c
}

// Stats returns a snapshot of what the server saw. It is safe to call
// during traffic.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.clone()
}

// ActionSets returns what the CRM holds: every applied action set, in the
// order applied, as decoded from its body (committed_at in UTC, unknown
// fields dropped).
func (s *Server) ActionSets() []crm.ActionSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]crm.ActionSet, len(s.order))
	for i, rec := range s.order {
		out[i] = cloneSet(rec.set)
	}
	return out
}

// Applied returns the CRM's id and the action set applied under key, and
// whether there is one.
func (s *Server) Applied(key string) (id string, set crm.ActionSet, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.byKey[key]
	if !ok {
		return "", crm.ActionSet{}, false
	}
	return rec.id, cloneSet(rec.set), true
}

// cloneSet is a deep copy of an action set, so that callers cannot change
// what the CRM holds.
func cloneSet(s crm.ActionSet) crm.ActionSet {
	s.Actions = slices.Clone(s.Actions)
	for i, a := range s.Actions {
		a.Lanes = slices.Clone(a.Lanes)
		if a.Window != nil {
			w := *a.Window
			a.Window = &w
		}
		s.Actions[i] = a
	}
	return s
}
