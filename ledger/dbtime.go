package ledger

import "time"

// Times cross the PostgreSQL boundary only through these helpers: a time
// written is UTC at microsecond precision (dbTime, dbTimeOrNil, dbTimePtr),
// a time read is UTC (timeOf, or .UTC() on a NOT NULL column). The clock
// itself keeps its zone and monotonic reading.

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

// dbTimeOrNil is t as the database stores it, or NULL for the zero time.
func dbTimeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	d := dbTime(t)
	return &d
}

// dbTimePtr is *t as the database stores it, or NULL for nil or the zero
// time.
func dbTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return dbTimeOrNil(*t)
}
