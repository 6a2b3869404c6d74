package retryafter

import (
	"fmt"

	"github.com/callscribe/callscribe/internal/scrub"
)

// Reason says why a Retry-After value could not be used. The values are
// stable strings, safe to store in an event row or a metric label.
type Reason string

const (
	// ReasonEmpty: the value was empty or held only spaces and tabs.
	ReasonEmpty Reason = "empty"
	// ReasonNegative: a number with a leading minus sign ("-5", "-1.5").
	ReasonNegative Reason = "negative"
	// ReasonFractional: a non-negative number with a decimal point ("1.5",
	// "1.", ".5"). delay-seconds is whole seconds only.
	ReasonFractional Reason = "fractional"
	// ReasonNonNumeric: anything else that is neither delay-seconds nor a
	// valid HTTP-date: "+5", "5s", "0x10", a date in another zone, a date
	// with an impossible day, garbage.
	ReasonNonNumeric Reason = "non-numeric"
)

// message is the default human explanation of r, used when a ParseError has
// no more specific Detail.
func (r Reason) message() string {
	switch r {
	case ReasonEmpty:
		return "empty value"
	case ReasonNegative:
		return "negative delays are not allowed"
	case ReasonFractional:
		return "fractional seconds are not allowed"
	case ReasonNonNumeric:
		return "neither delay-seconds nor an HTTP-date"
	default:
		return fmt.Sprintf("unknown reason %q", string(r))
	}
}

// ParseError is returned by Parse for a value that is not a valid
// Retry-After. Callers branch on Reason; Raw is the value as received,
// before trimming.
type ParseError struct {
	// Raw is the field value exactly as passed to Parse.
	Raw string
	// Reason classifies the problem.
	Reason Reason
	// Detail, when not empty, explains the problem more precisely than
	// Reason does ("HTTP-date must be in GMT", "day 31 does not exist in
	// Nov 1994"). It is for people, not for branching.
	Detail string
}

// Error reports the raw value and what was wrong with it, e.g.
// retry-after "1.5": fractional seconds are not allowed. The raw value
// is bounded by scrub.Raw (at most 256 bytes and a note).
func (e *ParseError) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Reason.message()
	}
	return fmt.Sprintf("retry-after %q: %s", scrub.Raw(e.Raw), msg)
}
