package capacity

import "time"

// SetSlotsNowForTest makes s's scripts read t instead of Redis TIME, so
// tests can advance time deterministically; the zero t restores TIME.
func SetSlotsNowForTest(s *Slots, t time.Time) {
	if t.IsZero() {
		s.nowMs.Store(0)
		return
	}
	s.nowMs.Store(t.UnixMilli())
}
