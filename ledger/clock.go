package ledger

import "time"

// Clock tells the time. The ledger stamps every event and deferral with it,
// so tests can inject a fixed or stepping clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// dbTime is t as PostgreSQL stores it: UTC, microsecond precision.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
