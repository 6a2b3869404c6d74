package outbox

import "time"

// Times cross the PostgreSQL boundary only through these helpers: a time
// written is UTC at microsecond precision, as the database keeps it; a
// time read is put in UTC. The clock itself keeps its zone and monotonic
// reading.

// dbTime is t as PostgreSQL stores it: UTC, microsecond precision.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// dbTimePtr is *t as the database stores it, or NULL for nil.
func dbTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	d := dbTime(*t)
	return &d
}

// timeOf is *t in UTC, or the zero time for NULL.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
