package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the real clock.
type System struct{}

// Now returns time.Now(): local zone, monotonic reading kept.
func (System) Now() time.Time { return time.Now() }

// Stub is a clock for tests that moves only when told: by Set, by Advance,
// and, when made by NewStepping, by its step on every reading. It is safe
// for concurrent use. The zero value reads the zero time and has no step.
type Stub struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// NewStub returns a Stub reading t until it is moved.
func NewStub(t time.Time) *Stub { return &Stub{now: t} }

// NewStepping returns a Stub that moves forward by step before each
// reading, so that consecutive readings are distinct and predictable: the
// first Now returns t+step.
func NewStepping(t time.Time, step time.Duration) *Stub { return &Stub{now: t, step: step} }

// Now returns the stub's time, after moving it by its step.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(s.step)
	return s.now
}

// Set moves the stub to t (backward too).
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = t
}

// Advance moves the stub forward by d and returns its new time.
func (s *Stub) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	return s.now
}

// Sleep waits d of real time, or until ctx is done; it reports whether the
// wait ran its course. d <= 0 waits nothing and reports whether ctx is
// still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
