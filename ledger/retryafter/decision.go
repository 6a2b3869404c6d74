package retryafter

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/scrub"
)

// Source says where a Decision's delay came from. The values are stable
// strings, safe to store.
type Source string

const (
	// SourceRetryAfter: the Retry-After field, as parsed.
	SourceRetryAfter Source = "retry-after"
	// SourceVendorDelay: a delay the caller read from a vendor's own header
	// and passed to DecideDelay.
	SourceVendorDelay Source = "vendor-delay"
	// SourceBackoff: capped exponential backoff with full jitter, because
	// there was no usable value (see Fallback).
	SourceBackoff Source = "backoff"
)

// Fallback says why the server's value was not used. The values are stable
// strings, safe to store. The zero value FallbackNone means it was used.
type Fallback string

const (
	// FallbackNone: the server's value was used.
	FallbackNone Fallback = ""
	// FallbackMissing: the response had no Retry-After field.
	FallbackMissing Fallback = "missing"
	// FallbackEmpty: the field was empty or blank.
	FallbackEmpty Fallback = Fallback(ReasonEmpty)
	// FallbackNegative: a negative number.
	FallbackNegative Fallback = Fallback(ReasonNegative)
	// FallbackFractional: a number with a fraction.
	FallbackFractional Fallback = Fallback(ReasonFractional)
	// FallbackNonNumeric: neither delay-seconds nor a valid HTTP-date.
	FallbackNonNumeric Fallback = Fallback(ReasonNonNumeric)
	// FallbackPastDate: a valid HTTP-date not after now.
	FallbackPastDate Fallback = "past-date"
)

// Reference says what an HTTP-date Retry-After was measured against. The
// values are stable strings, safe to store. The zero value "" means none:
// the value was not a date.
type Reference string

const (
	// ReferenceDateHeader: the response's own Date header, so that the
	// delay is what the server meant whatever the host's clock says.
	ReferenceDateHeader Reference = "date-header"
	// ReferenceHostClock: the host's clock (Policy.Clock), because the
	// response had no Date header or it was not a valid HTTP-date.
	ReferenceHostClock Reference = "host-clock"
)

// fallbackFor maps a parse failure to its fallback reason.
func fallbackFor(r Reason) Fallback { return Fallback(r) }

// Decision is what Policy decided for one throttling response, with
// everything a caller needs to record exactly what happened.
type Decision struct {
	// NotBefore is the deadline for the throttling scope, in UTC: now plus
	// Delay. Never before now.
	NotBefore time.Time
	// Delay is how long the scope waits: 0 <= Delay <= Policy.MaxDelay.
	Delay time.Duration
	// Requested is the delay before clamping. It equals Delay unless
	// Clamped; it is math.MaxInt64 for a value too large for a Duration.
	Requested time.Duration
	// Clamped reports that Requested exceeded Policy.MaxDelay and Delay was
	// cut to MaxDelay.
	Clamped bool
	// Source says where Delay came from.
	Source Source
	// Form is the form of the Retry-After value when it parsed, even when
	// it was not used (FallbackPastDate); "" otherwise.
	Form Form
	// DateReference is what an HTTP-date was measured against (also for
	// FallbackPastDate); "" unless Form.IsDate().
	DateReference Reference
	// Raw is the header text as received (for DecideDelay, the text the
	// caller passed). Empty when not Present.
	Raw string
	// Present reports whether the response carried the header.
	Present bool
	// Fallback says why the server's value was not used; FallbackNone when
	// it was.
	Fallback Fallback
	// Attempt is the attempt number the backoff was sized for.
	Attempt int
}

// String renders d as one logfmt-style line for logs and event rows, e.g.
//
//	source=retry-after form=delay-seconds raw="120" attempt=0 delay=2m0s not_before=2026-03-01T12:02:00Z
//	source=retry-after form=imf-fixdate date_reference=date-header raw="Sun, 01 Mar 2026 12:02:00 GMT" attempt=0 delay=2m0s not_before=2026-03-01T12:02:05Z
func (d Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "source=%s", d.Source)
	if d.Fallback != FallbackNone {
		fmt.Fprintf(&b, " fallback=%s", d.Fallback)
	}
	if d.Form != "" {
		fmt.Fprintf(&b, " form=%s", d.Form)
	}
	if d.Form.IsDate() && d.DateReference != "" {
		fmt.Fprintf(&b, " date_reference=%s", d.DateReference)
	}
	if d.Present {
		fmt.Fprintf(&b, " raw=%q", scrub.Raw(d.Raw))
	}
	fmt.Fprintf(&b, " attempt=%d delay=%s", d.Attempt, d.Delay)
	if d.Clamped {
		fmt.Fprintf(&b, " requested=%s clamped=true", d.Requested)
	}
	fmt.Fprintf(&b, " not_before=%s", d.NotBefore.Format(time.RFC3339Nano))
	return b.String()
}

// LogValue renders d as a slog group with the same keys as String. Raw,
// in both, is bounded by scrub.Raw (at most 256 bytes and a note).
func (d Decision) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("source", string(d.Source))}
	if d.Fallback != FallbackNone {
		attrs = append(attrs, slog.String("fallback", string(d.Fallback)))
	}
	if d.Form != "" {
		attrs = append(attrs, slog.String("form", string(d.Form)))
	}
	if d.Form.IsDate() && d.DateReference != "" {
		attrs = append(attrs, slog.String("date_reference", string(d.DateReference)))
	}
	if d.Present {
		attrs = append(attrs, slog.String("raw", scrub.Raw(d.Raw)))
	}
	attrs = append(attrs, slog.Int("attempt", d.Attempt), slog.Duration("delay", d.Delay))
	if d.Clamped {
		attrs = append(attrs, slog.Duration("requested", d.Requested), slog.Bool("clamped", true))
	}
	attrs = append(attrs, slog.Time("not_before", d.NotBefore))
	return slog.GroupValue(attrs...)
}
