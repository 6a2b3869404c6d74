package capacity

import "time"

// SetCallerIDsNowForTest makes c's scripts read t instead of Redis TIME, so
// tests can advance time deterministically; the zero t restores TIME.
func SetCallerIDsNowForTest(c *CallerIDs, t time.Time) {
	if t.IsZero() {
		c.nowMs.Store(0)
		return
	}
	c.nowMs.Store(t.UnixMilli())
}
