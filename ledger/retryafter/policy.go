package retryafter

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/fielderr"
)

const (
	// BaseBackoffDefault is Policy.BaseBackoff when left zero.
	BaseBackoffDefault = time.Second
	// MaxBackoffDefault is Policy.MaxBackoff when left zero: 64s, the
	// seventh doubling of BaseBackoffDefault (1, 2, 4, ... 64s), so that a
	// scope that keeps failing without a Retry-After is asked again at
	// least about once a minute.
	MaxBackoffDefault = 64 * time.Second
	// MaxDelayDefault is Policy.MaxDelay when left zero.
	MaxDelayDefault = time.Hour
)

// Policy turns a throttling response into a Decision: how long the
// throttling scope must wait, and why. The zero Policy is ready to use and
// means all the defaults. The yaml keys are those of callscribe's
// configuration file (its retry_after section).
type Policy struct {
	// BaseBackoff is the backoff ceiling of attempt 0 when the response
	// carries no usable Retry-After; it doubles with each attempt up to
	// MaxBackoff. Default BaseBackoffDefault (1s); zero means the default;
	// negative is refused.
	BaseBackoff time.Duration `yaml:"base_backoff"`

	// MaxBackoff caps the exponential backoff ceiling. Default
	// MaxBackoffDefault (64s); zero means the default; it must be at least
	// BaseBackoff.
	MaxBackoff time.Duration `yaml:"max_backoff"`

	// MaxDelay is the longest deferral a single response can cause: a
	// Retry-After asking for more (including values too large for a
	// time.Duration) is clamped to it and the Decision says Clamped.
	// Default MaxDelayDefault (1h); zero means the default; it must be at
	// least MaxBackoff, so that a fallback is never clamped.
	MaxDelay time.Duration `yaml:"max_delay"`

	// Clock supplies now, read in UTC: every Decision's NotBefore is UTC
	// whatever the clock's zone. Default (nil): clock.System.
	Clock clock.Clock `yaml:"-"`

	// Rand supplies the backoff jitter. Default (nil): the goroutine-safe
	// top-level functions of math/rand/v2. A *math/rand/v2.Rand is not
	// safe for concurrent use; share one only with a lock.
	Rand Rand `yaml:"-"`
}

// WithDefaults returns a copy of p with every zero field set to its default.
// Negative durations are kept, for Validate to refuse.
func (p Policy) WithDefaults() Policy {
	p.BaseBackoff = cmp.Or(p.BaseBackoff, BaseBackoffDefault)
	p.MaxBackoff = cmp.Or(p.MaxBackoff, MaxBackoffDefault)
	p.MaxDelay = cmp.Or(p.MaxDelay, MaxDelayDefault)
	p.Clock = cmp.Or[clock.Clock](p.Clock, clock.System{})
	p.Rand = cmp.Or[Rand](p.Rand, globalRand{})
	return p
}

// Validate reports every problem with p after defaults are applied, each a
// *fielderr.Error naming the field, e.g. "MaxBackoff: 1s must be >=
// BaseBackoff (2s)". Call it once where the configuration is loaded:
// Decide panics on an invalid Policy.
func (p Policy) Validate() error {
	p = p.WithDefaults()
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"BaseBackoff", p.BaseBackoff}, {"MaxBackoff", p.MaxBackoff}, {"MaxDelay", p.MaxDelay}} {
		if f.d < 0 {
			errs = append(errs, fielderr.Errorf(f.name, "%s must not be negative", f.d))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if p.MaxBackoff < p.BaseBackoff {
		errs = append(errs, fielderr.Errorf("MaxBackoff", "%s must be >= BaseBackoff (%s)", p.MaxBackoff, p.BaseBackoff).Refer("BaseBackoff"))
	}
	if p.MaxDelay < p.MaxBackoff {
		errs = append(errs, fielderr.Errorf("MaxDelay", "%s must be >= MaxBackoff (%s)", p.MaxDelay, p.MaxBackoff).Refer("MaxBackoff"))
	}
	return errors.Join(errs...)
}

// ready applies the defaults and panics if p is invalid: using a Policy that
// was never validated is a programming error.
func (p Policy) ready() Policy {
	if err := p.Validate(); err != nil {
		panic(fmt.Sprintf("retryafter: Decide on an invalid Policy: %v", err))
	}
	return p.WithDefaults()
}

// Decide turns the Retry-After field of a throttling response (429, or 503
// with Retry-After) into a Decision, judging an HTTP-date against the host's
// clock. It is DecideFor without a Date header; callers that have the
// response's Date should use DecideFor. present reports whether the response
// had the field at all; when false, header is ignored. attempt counts
// retries from 0 and sizes the fallback backoff.
//
// Valid delay-seconds (including 0) and a future HTTP-date are used as they
// are, clamped to MaxDelay. A date not after now, and a missing, empty,
// negative, fractional or otherwise malformed value, fall back to
// Backoff(BaseBackoff, MaxBackoff, attempt); Decision.Fallback says why.
//
// Decide panics if p is invalid (see Validate).
func (p Policy) Decide(header string, present bool, attempt int) Decision {
	return p.DecideFor(header, present, "", attempt)
}

// DecideFor is Decide for a response whose Date header is responseDate
// (the raw field value; "" when the response had none). A Retry-After
// HTTP-date names an instant on the server's clock, so DecideFor measures
// it against the server's own Date when that is a valid HTTP-date (any of
// the three forms Parse accepts, surrounding spaces and tabs ignored):
// Delay = Retry-After date - Date, whatever the host's clock says. A
// missing or unparsable Date falls back to the host's clock (Policy.Clock),
// as Decide does. Decision.DateReference records which reference was used.
// A date not after its reference falls back to backoff (FallbackPastDate).
//
// Delay-seconds ignore responseDate. NotBefore is always the host's now
// (Policy.Clock) plus Delay.
//
// DecideFor panics if p is invalid (see Validate).
func (p Policy) DecideFor(header string, present bool, responseDate string, attempt int) Decision {
	p = p.ready()
	now := p.Clock.Now().UTC()
	if !present {
		return p.fallback(now, Decision{Attempt: attempt}, FallbackMissing)
	}
	d := Decision{Present: true, Raw: header, Attempt: attempt}
	ref, refKind := now, ReferenceHostClock
	if date, ok := parseDateHeader(responseDate, now); ok {
		ref, refKind = date, ReferenceDateHeader
	}
	v, err := Parse(header, ref)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			panic(fmt.Sprintf("retryafter: Parse returned %T, want *ParseError", err))
		}
		return p.fallback(now, d, fallbackFor(pe.Reason))
	}
	d.Form = v.Form
	if v.Form.IsDate() {
		d.DateReference = refKind
		if v.Delay <= 0 {
			return p.fallback(now, d, FallbackPastDate)
		}
	}
	return p.use(now, d, SourceRetryAfter, v.Delay)
}

// DecideDelay is Decide for a vendor that states its delay in a header of
// its own (for example a reset-after in seconds or milliseconds): the
// caller parses it into d and passes the text as raw for the record. A
// negative d falls back to backoff with FallbackNegative; any other d is
// used, clamped to MaxDelay, with Source SourceVendorDelay.
//
// DecideDelay panics if p is invalid (see Validate).
func (p Policy) DecideDelay(d time.Duration, raw string, attempt int) Decision {
	p = p.ready()
	now := p.Clock.Now().UTC()
	dec := Decision{Present: true, Raw: raw, Attempt: attempt}
	if d < 0 {
		return p.fallback(now, dec, FallbackNegative)
	}
	return p.use(now, dec, SourceVendorDelay, d)
}

// use completes d with a delay the server asked for, clamped to MaxDelay.
func (p Policy) use(now time.Time, d Decision, source Source, requested time.Duration) Decision {
	d.Source = source
	d.Requested = requested
	d.Delay = requested
	if requested > p.MaxDelay {
		d.Delay = p.MaxDelay
		d.Clamped = true
	}
	d.NotBefore = now.Add(d.Delay)
	return d
}

// fallback completes d with a jittered backoff.
func (p Policy) fallback(now time.Time, d Decision, why Fallback) Decision {
	d.Source = SourceBackoff
	d.Fallback = why
	d.Delay = Backoff(p.BaseBackoff, p.MaxBackoff, d.Attempt, p.Rand)
	d.Requested = d.Delay
	d.NotBefore = now.Add(d.Delay)
	return d
}

// parseDateHeader parses a response's Date field value as an HTTP-date in
// any of the three forms, ignoring surrounding spaces and tabs. now resolves
// an RFC 850 two-digit year.
func parseDateHeader(raw string, now time.Time) (time.Time, bool) {
	s := strings.Trim(raw, " \t")
	if s == "" {
		return time.Time{}, false
	}
	form, date, _ := parseHTTPDate(s, now)
	return date, form != ""
}
