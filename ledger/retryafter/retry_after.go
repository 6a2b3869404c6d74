package retryafter

import (
	"math"
	"strings"
	"time"
)

// Form is the syntactic form a Retry-After value arrived in. The values are
// stable strings, safe to store. The zero value "" means no form: the value
// did not parse, or there was no header.
type Form string

const (
	// FormDelaySeconds: 1*DIGIT, e.g. "120".
	FormDelaySeconds Form = "delay-seconds"
	// FormIMFFixdate: the preferred HTTP-date, e.g.
	// "Sun, 06 Nov 1994 08:49:37 GMT".
	FormIMFFixdate Form = "imf-fixdate"
	// FormRFC850: the obsolete RFC 850 date with a two-digit year, e.g.
	// "Sunday, 06-Nov-94 08:49:37 GMT".
	FormRFC850 Form = "rfc850"
	// FormASCTime: the obsolete ANSI C asctime() date, e.g.
	// "Sun Nov  6 08:49:37 1994".
	FormASCTime Form = "asctime"
)

// IsDate reports whether f is one of the three HTTP-date forms.
func (f Form) IsDate() bool {
	return f == FormIMFFixdate || f == FormRFC850 || f == FormASCTime
}

// Value is a successfully parsed Retry-After field value.
type Value struct {
	// Raw is the field value exactly as passed to Parse, before trimming.
	Raw string
	// Form is the form the value was written in; never "" in a Value
	// returned without error.
	Form Form
	// Delay is how long the server asked us to wait. For delay-seconds it
	// is the number of seconds (never negative). For an HTTP-date it is
	// Date minus the now passed to Parse, and is negative or zero for a
	// date that is not in the future.
	Delay time.Duration
	// Overflow reports that the true delay does not fit in a
	// time.Duration (about 292 years): Delay is then saturated at
	// math.MaxInt64 (or, for a date far in the past, math.MinInt64). It is
	// not an error; Policy clamps such a value to MaxDelay.
	Overflow bool
	// Date is the instant named by an HTTP-date, in UTC, with whole
	// seconds. It is the zero time for delay-seconds.
	Date time.Time
}

// maxDelaySeconds is the largest number of seconds that fits in a
// time.Duration.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// Parse parses an HTTP Retry-After field value (RFC 9110 §10.2.3):
//
//	Retry-After = HTTP-date / delay-seconds
//	delay-seconds = 1*DIGIT
//
// Surrounding spaces and horizontal tabs are ignored. An HTTP-date is
// accepted in all three forms RFC 9110 §5.6.7 requires recipients to accept
// (see Form); IMF-fixdate and RFC 850 dates must say GMT. The date grammar is
// case-sensitive, as the RFC says; the day name must be a valid name but is
// not checked against the date. A seconds field of 60 (a leap second) is
// accepted and read as the first second of the next minute. A two-digit
// RFC 850 year is read as the latest year with those last two digits that
// does not put the date more than 50 years after now.
//
// now is used only to compute Value.Delay for dates and to resolve RFC 850
// years. Errors are always *ParseError.
func Parse(raw string, now time.Time) (Value, error) {
	s := strings.Trim(raw, " \t")
	if s == "" {
		return Value{}, &ParseError{Raw: raw, Reason: ReasonEmpty}
	}
	if reason, ok := classifyNumber(s); ok {
		if reason != "" {
			return Value{}, &ParseError{Raw: raw, Reason: reason}
		}
		return parseDelaySeconds(raw, s), nil
	}
	form, date, detail := parseHTTPDate(s, now)
	if form == "" {
		return Value{}, &ParseError{Raw: raw, Reason: ReasonNonNumeric, Detail: detail}
	}
	delay := date.Sub(now)
	// time.Time.Sub saturates; a saturated result does not land on date.
	overflow := (delay == math.MaxInt64 || delay == math.MinInt64) && !now.Add(delay).Equal(date)
	return Value{Raw: raw, Form: form, Delay: delay, Overflow: overflow, Date: date}, nil
}

// classifyNumber reports whether s looks like a number: an optional minus
// sign followed by digits with at most one decimal point and at least one
// digit. If so, reason is "" for valid delay-seconds (digits only) and the
// reason it is invalid otherwise. A leading plus sign is not a number.
func classifyNumber(s string) (reason Reason, ok bool) {
	negative := s[0] == '-'
	if negative {
		s = s[1:]
	}
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigit(c):
			digits++
		case c == '.':
			dots++
		default:
			return "", false
		}
	}
	switch {
	case digits == 0 || dots > 1:
		return "", false
	case negative:
		return ReasonNegative, true
	case dots == 1:
		return ReasonFractional, true
	default:
		return "", true
	}
}

// parseDelaySeconds converts s, which holds only ASCII digits, into a Value.
// Leading zeros are allowed; a number too large for a time.Duration sets
// Overflow.
func parseDelaySeconds(raw, s string) Value {
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i] - '0')
		if n > (maxDelaySeconds-d)/10 {
			return Value{Raw: raw, Form: FormDelaySeconds, Delay: math.MaxInt64, Overflow: true}
		}
		n = n*10 + d
	}
	return Value{Raw: raw, Form: FormDelaySeconds, Delay: time.Duration(n) * time.Second}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
