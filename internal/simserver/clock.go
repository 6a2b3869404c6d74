package simserver

import "time"

// SystemClock is the real clock, in UTC: what a simulator uses when its
// Config gives no clock.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }
