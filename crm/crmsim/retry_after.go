package crmsim

import (
	"strconv"
	"time"

	"github.com/callscribe/callscribe/internal/simserver"
)

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
		return strconv.FormatInt(simserver.CeilSeconds(deadline.Sub(now)), 10), true
	case FormIMFFixdate:
		return simserver.CeilSecond(deadline).Format(simserver.LayoutIMFFixdate), true
	case FormMalformed:
		return malformedValues[turn%len(malformedValues)], true
	}
	return "", false
}
