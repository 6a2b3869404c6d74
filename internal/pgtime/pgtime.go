// Package pgtime converts times at the PostgreSQL boundary: a time written
// is UTC at microsecond precision, as the database keeps it; a time read
// is put in UTC; NULL is nil on the way in and the zero time.Time on the
// way out. The clock itself keeps its zone and monotonic reading. The
// ledger and the outbox share it.
package pgtime

import "time"

// Write is t as PostgreSQL stores it: UTC, microsecond precision.
func Write(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// WritePtr is *t as the database stores it, or NULL for nil.
func WritePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	d := Write(*t)
	return &d
}

// WriteOrNull is t as the database stores it, or NULL for the zero time.
func WriteOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return WritePtr(&t)
}

// WritePtrOrNull is *t as the database stores it, or NULL for nil or the
// zero time.
func WritePtrOrNull(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return WriteOrNull(*t)
}

// Read is *t in UTC, or the zero time for NULL.
func Read(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
