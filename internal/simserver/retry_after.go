package simserver

import "time"

// LayoutIMFFixdate is RFC 9110's preferred HTTP-date, in Go's notation.
// Times are formatted in UTC, so the literal "GMT" is right.
const LayoutIMFFixdate = "Mon, 02 Jan 2006 15:04:05 GMT"

// CeilSeconds is d in whole seconds, rounded up, at least 0: a
// delay-seconds Retry-After that errs late, never early.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// CeilSecond is t in UTC rounded up to a whole second: an HTTP-date that
// errs late, never early.
func CeilSecond(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
