package simserver

import (
	"math/rand/v2"
	"sync"
	"time"
)

// NewRand returns a random source seeded from the clock: what a
// simulator uses when its Config gives none.
func NewRand() *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	return rand.New(rand.NewPCG(seed, seed>>1|1))
}

// Rand is a *rand.Rand shared by a simulator's requests under a mutex.
// Its zero value is not usable; see NewLockedRand.
type Rand struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// NewLockedRand returns a Rand drawing from rng, which nothing else may
// use afterwards.
func NewLockedRand(rng *rand.Rand) *Rand { return &Rand{rng: rng} }

// Chance draws whether something of probability p happens. It draws
// nothing when p is 0 or 1.
func (r *Rand) Chance(p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64() < p
}

// Pick draws one of n choices.
func (r *Rand) Pick(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

// Int64N draws a number in [0, n).
func (r *Rand) Int64N(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Int64N(n)
}

// ScriptedSource is a rand.Source for tests that returns queued values,
// then Then. It is safe for concurrent use.
type ScriptedSource struct {
	// Then is returned once the queue is empty.
	Then   uint64
	mu     sync.Mutex
	values []uint64
}

// Uint64 returns the next queued value, or Then.
func (s *ScriptedSource) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.values) == 0 {
		return s.Then
	}
	v := s.values[0]
	s.values = s.values[1:]
	return v
}

// Push queues values.
func (s *ScriptedSource) Push(v ...uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, v...)
}

// Reset forgets the values not drawn.
func (s *ScriptedSource) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = nil
}
