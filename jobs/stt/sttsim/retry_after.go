package sttsim

import (
	"strconv"
	"time"

	"github.com/callscribe/callscribe/internal/simserver"
)

// Layouts of the three HTTP-date forms of RFC 9110 §5.6.7, in Go's notation.
// Times are formatted in UTC, so the literal "GMT" is right.
const (
	layoutIMFFixdate = simserver.LayoutIMFFixdate
	layoutRFC850     = "Monday, 02-Jan-06 15:04:05 GMT"
	layoutASCTime    = "Mon Jan _2 15:04:05 2006"
)

// malformedValues are what FormMalformed sends, in rotation: a word, a
// delay with a unit, and an IMF-fixdate without its comma. None is a valid
// Retry-After.
var malformedValues = []string{"soon", "2 seconds", "Sun 06 Nov 1994 08:49:37 GMT"}

// retryAfterValue is the Retry-After value that announces deadline to a
// client at now in form f (never FormMixed), and false for FormNone. turn
// picks the malformed value.
//
// Every usable value errs late, never early: delay-seconds are rounded up
// and dates are rounded up to the next whole second, so that a client that
// honours the header arrives at or after deadline.
func retryAfterValue(f RetryAfterForm, now, deadline time.Time, turn int) (string, bool) {
	switch f {
	case FormSeconds:
		return strconv.FormatInt(simserver.CeilSeconds(deadline.Sub(now)), 10), true
	case FormIMFFixdate:
		return simserver.CeilSecond(deadline).Format(layoutIMFFixdate), true
	case FormRFC850:
		return simserver.CeilSecond(deadline).Format(layoutRFC850), true
	case FormASCTime:
		return simserver.CeilSecond(deadline).Format(layoutASCTime), true
	case FormMalformed:
		return malformedValues[turn%len(malformedValues)], true
	default:
		return "", false
	}
}
