package crmsim

import (
	"strconv"
	"time"
)

// layoutIMFFixdate is RFC 9110's preferred HTTP-date, in Go's notation.
// Times are formatted in UTC, so the literal "GMT" is right.
const layoutIMFFixdate = "Mon, 02 Jan 2006 15:04:05 GMT"

// malformedValues are what FormMalformed sends, in rotation: a word, a
// delay with a unit, and an IMF-fixdate without its comma. None is a valid
// Retry-After.
var malformedValues = []string{"soon", "2 seconds", "Sun 06 Nov 1994 08:49:37 GMT"}

// retryAfterValue is the Retry-After that tells a sender at now to come
// back at deadline, in form f, and false for FormNone. turn picks the
// malformed value. Usable values err late, never early: delay-seconds and
// dates are rounded up to whole seconds.
func retryAfterValue(f RetryAfterForm, now, deadline time.Time, turn int) (string, bool) {
	switch f {
	case FormSeconds:
		return strconv.FormatInt(ceilSeconds(deadline.Sub(now)), 10), true
	case FormIMFFixdate:
		return ceilSecond(deadline).Format(layoutIMFFixdate), true
	case FormMalformed:
		return malformedValues[turn%len(malformedValues)], true
	}
	return "", false
}

// ceilSeconds is d in whole seconds, rounded up, at least 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// ceilSecond is t in UTC rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
