package ledger

import "fmt"

// State is where a recording stands in the pipeline.
type State string

// The states of the state machine (docs/design.md).
const (
	StateReceived    State = "received"
	StateEligible    State = "eligible"
	StateSubmitted   State = "submitted"
	StateRetryWait   State = "retry_wait"
	StateTranscribed State = "transcribed"
	StateValidated   State = "validated"
	StateCommitted   State = "committed"
	StateExpired     State = "expired"
	StateFailed      State = "failed"
)

// States lists every state, in pipeline order.
func States() []State {
	return []State{
		StateReceived, StateEligible, StateSubmitted, StateRetryWait, StateTranscribed,
		StateValidated, StateCommitted, StateExpired, StateFailed,
	}
}

// Terminal reports whether the pipeline is done with s: no automatic
// transition leaves it. Expired and failed recordings are reviewable: only
// an operator's re-drive (`callscribe jobs retry`, the edges in RedriveEdges)
// moves them on. Terminal recordings are the only ones the retention purge
// may remove.
func (s State) Terminal() bool {
	switch s {
	case StateCommitted, StateExpired, StateFailed:
		return true
	}
	return false
}

// Valid reports whether s is one of the states of the state machine.
func (s State) Valid() bool {
	for _, v := range States() {
		if v == s {
			return true
		}
	}
	return false
}

// Edge is one allowed transition.
type Edge struct {
	From, To State
}

func (e Edge) String() string { return fmt.Sprintf("%s -> %s", e.From, e.To) }

// edges is the state machine, defined once. The migration that creates
// recording_state_edges holds the same set; TestStateMachineMatchesDatabase
// fails if the two ever differ.
var edges = func() map[Edge]bool {
	m := map[Edge]bool{
		{StateReceived, StateEligible}:     true,
		{StateEligible, StateSubmitted}:    true,
		{StateSubmitted, StateTranscribed}: true,
		{StateSubmitted, StateRetryWait}:   true,
		{StateRetryWait, StateEligible}:    true,
		{StateTranscribed, StateValidated}: true,
		{StateValidated, StateCommitted}:   true,
		{StateEligible, StateFailed}:       true,
		{StateSubmitted, StateFailed}:      true,
		{StateTranscribed, StateFailed}:    true,
	}
	for _, s := range States() {
		if !s.Terminal() {
			m[Edge{s, StateExpired}] = true // any non-terminal state may expire
		}
	}
	for _, e := range RedriveEdges() {
		m[e] = true
	}
	return m
}()

// RedriveEdges are the operator's edges out of final states: re-driving a
// reviewable recording (`jobs retry`) and re-validating a committed one to
// produce a new action version (`jobs revalidate`).
func RedriveEdges() []Edge {
	return []Edge{{StateExpired, StateEligible}, {StateFailed, StateEligible}, {StateCommitted, StateValidated}}
}

// Edges returns every allowed transition.
func Edges() []Edge {
	out := make([]Edge, 0, len(edges))
	for _, s := range States() {
		for _, t := range States() {
			if edges[Edge{s, t}] {
				out = append(out, Edge{s, t})
			}
		}
	}
	return out
}

// CanTransition reports whether the state machine allows from -> to.
func CanTransition(from, to State) bool { return edges[Edge{from, to}] }

// countsAttempt reports whether entering s is a submission to the vendor:
// the recording's attempt counts those.
func countsAttempt(s State) bool { return s == StateSubmitted }
