package ledger

import (
	"sync"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// The ledger's clock policy. Every worker of a platform compares deadlines
// on one clock, the database's, so that a worker whose own clock runs fast
// or slow can neither submit into a cooldown early nor write a deadline
// that others read as already past:
//
//   - an admission compares the scope's deadline to the database's clock
//     read in the same statement (Admission.At), never to the worker's;
//   - everything else the ledger and its callers stamp or compute (event
//     times, the deadline a throttled answer asks for, the instant a
//     request is sent) is on Ledger.Clock: the worker's clock corrected by
//     the offset to the database's, measured at every admission read
//     (the database's reading against the middle of the round trip, the
//     sample with the shortest round trip of the last OffsetSampleTTL
//     kept), so it agrees with the database's within half a round trip.
//
// A ledger given a Clock (tests, with a stub) uses that clock for both.

// OffsetSampleTTL is how long the clock offset measured on the shortest
// round trip stands before a longer one may replace it.
const OffsetSampleTTL = 10 * time.Second

// databaseClock is the worker's clock plus its measured offset to the
// database's clock. Safe for concurrent use.
type databaseClock struct {
	local clock.Clock

	mu      sync.Mutex
	offset  time.Duration
	rtt     time.Duration
	sampled time.Time // local time of the sample kept; zero: none yet
}

// Now is the database's clock as this process estimates it. The local
// clock's monotonic reading is kept.
func (c *databaseClock) Now() time.Time {
	c.mu.Lock()
	off := c.offset
	c.mu.Unlock()
	return c.local.Now().Add(off)
}

// sample takes one reading of the database's clock (db) made between the
// local readings before and after.
func (c *databaseClock) sample(before, after, db time.Time) {
	rtt := after.Sub(before)
	if rtt < 0 || db.IsZero() {
		return
	}
	off := db.Sub(before.Add(rtt / 2))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sampled.IsZero() || rtt <= c.rtt || after.Sub(c.sampled) > OffsetSampleTTL {
		c.offset, c.rtt, c.sampled = off, rtt, after
	}
}

// Offset is the offset kept: the database's clock minus the local one.
func (c *databaseClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}
