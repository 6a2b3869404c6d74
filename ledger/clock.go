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

// The database's NULL is the zero time.Time of the ledger's API; these
// convert at the boundary.

// timeOf is *t in UTC, or the zero time for NULL.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// timeOrNil is &t, or NULL for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// dbTimeOrNil is t as the database stores it, or NULL for the zero time.
func dbTimeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	d := dbTime(t)
	return &d
}
