package retryafter

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/clock"
)

// genPolicy draws a valid Policy with a fixed clock and a seeded Rand.
func genPolicy(now time.Time) *rapid.Generator[Policy] {
	return rapid.Custom(func(t *rapid.T) Policy {
		base := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "base"))
		maxBackoff := base + time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "maxBackoffExtra"))
		maxDelay := maxBackoff + time.Duration(rapid.Int64Range(0, int64(7*24*time.Hour)).Draw(t, "maxDelayExtra"))
		seed := rapid.Uint64().Draw(t, "seed")
		return Policy{
			BaseBackoff: base,
			MaxBackoff:  maxBackoff,
			MaxDelay:    maxDelay,
			Clock:       clock.NewStub(now),
			Rand:        rand.New(rand.NewPCG(seed, 1)),
		}
	})
}

// checkDecision holds for every Decision of a valid Policy.
func checkDecision(t *rapid.T, p Policy, now time.Time, d Decision) {
	if d.NotBefore.Before(now) {
		t.Fatalf("NotBefore %v before now %v: %v", d.NotBefore, now, d)
	}
	if !d.NotBefore.Equal(now.Add(d.Delay)) || d.NotBefore.Location() != time.UTC {
		t.Fatalf("NotBefore %v, want now+Delay %v in UTC", d.NotBefore, now.Add(d.Delay))
	}
	if d.Delay < 0 || d.Delay > p.MaxDelay {
		t.Fatalf("Delay %v outside [0, MaxDelay %v]: %v", d.Delay, p.MaxDelay, d)
	}
	if d.Clamped != (d.Requested > p.MaxDelay) {
		t.Fatalf("Clamped %v but Requested %v vs MaxDelay %v", d.Clamped, d.Requested, p.MaxDelay)
	}
	if d.Clamped && d.Delay != p.MaxDelay || !d.Clamped && d.Delay != d.Requested {
		t.Fatalf("Delay %v, Requested %v, Clamped %v inconsistent", d.Delay, d.Requested, d.Clamped)
	}
	if (d.Source == SourceBackoff) != (d.Fallback != FallbackNone) {
		t.Fatalf("Source %s with Fallback %q", d.Source, d.Fallback)
	}
	if d.Source == SourceBackoff && d.Delay >= BackoffCeiling(p.BaseBackoff, p.MaxBackoff, d.Attempt) {
		t.Fatalf("backoff Delay %v not below its ceiling %v", d.Delay, BackoffCeiling(p.BaseBackoff, p.MaxBackoff, d.Attempt))
	}
}

func TestDecideProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := genNow().Draw(t, "now")
		p := genPolicy(now).Draw(t, "policy")
		header := genRaw(now).Draw(t, "header")
		present := rapid.Float64Range(0, 1).Draw(t, "presence") < 0.9
		attempt := genAttempt().Draw(t, "attempt")
		// The response's Date: none, near now in any form, or anything.
		date := rapid.OneOf(
			rapid.Just(""),
			rapid.Custom(func(t *rapid.T) string {
				at := now.Add(time.Duration(rapid.Int64Range(-30, 30).Draw(t, "dateSkew")) * time.Second)
				return at.Format(rapid.SampledFrom([]string{layoutIMF, layoutRFC850, layoutASCTime}).Draw(t, "dateLayout"))
			}),
			genRaw(now),
		).Draw(t, "date")

		d := p.DecideFor(header, present, date, attempt)
		checkDecision(t, p, now, d)
		if date == "" {
			// Decide is DecideFor without a Date, up to the jitter (p.Rand
			// has moved on).
			plain := p.Decide(header, present, attempt)
			if plain.Source == SourceBackoff {
				plain.Delay, plain.Requested, plain.NotBefore = d.Delay, d.Requested, d.NotBefore
			}
			if plain != d {
				t.Fatalf("Decide = %v, DecideFor without a Date = %v", plain, d)
			}
		}
		// The model says whether the Date is an HTTP-date, and so what a
		// Retry-After date is measured against.
		ref, wantRef := now, ReferenceHostClock
		if m := modelParse(date, now); m.reason == "" && m.form.IsDate() {
			ref, wantRef = m.date, ReferenceDateHeader
		}

		// The outcome follows from what Parse (checked against the model)
		// says about the header.
		if !present {
			if d.Fallback != FallbackMissing || d.Present || d.Raw != "" {
				t.Fatalf("absent header: %v", d)
			}
			return
		}
		if !d.Present || d.Raw != header {
			t.Fatalf("Present %v Raw %q, want true %q", d.Present, d.Raw, header)
		}
		if !d.Form.IsDate() && d.DateReference != "" || d.Form.IsDate() && d.DateReference != wantRef {
			t.Fatalf("Date %q, Decision %v: DateReference %q, want %q for a date", date, d, d.DateReference, wantRef)
		}
		v, err := Parse(header, ref)
		switch {
		case err != nil:
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %T is not *ParseError", err)
			}
			if want := Fallback(pe.Reason); d.Fallback != want || d.Form != "" {
				t.Fatalf("Parse error %v, Decision %v: want fallback %s and no form", err, d, want)
			}
		case v.Form.IsDate() && v.Delay <= 0:
			if d.Fallback != FallbackPastDate || d.Form != v.Form {
				t.Fatalf("past date %v, Decision %v: want fallback past-date", v.Date, d)
			}
		default:
			if d.Source != SourceRetryAfter || d.Form != v.Form || d.Requested != v.Delay {
				t.Fatalf("usable value %+v, Decision %v", v, d)
			}
		}
	})
}

func TestDecideDelayProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := genNow().Draw(t, "now")
		p := genPolicy(now).Draw(t, "policy")
		delay := time.Duration(rapid.OneOf(
			rapid.Int64(),
			rapid.Int64Range(-int64(time.Hour), int64(8*24*time.Hour)),
			rapid.SampledFrom([]int64{0, -1, math.MaxInt64, math.MinInt64}),
		).Draw(t, "delay"))
		attempt := genAttempt().Draw(t, "attempt")

		d := p.DecideDelay(delay, "x", attempt)
		checkDecision(t, p, now, d)
		if (delay < 0) != (d.Fallback == FallbackNegative) {
			t.Fatalf("DecideDelay(%v) = %v", delay, d)
		}
		if delay >= 0 && d.Requested != delay {
			t.Fatalf("DecideDelay(%v) Requested %v", delay, d.Requested)
		}
	})
}

// TestDecideForIgnoresHostSkew: a vendor that sends Date = its now and
// Retry-After = its now + d (whole seconds), in any of the HTTP-date forms,
// gets exactly d (clamped to MaxDelay) from a host whose clock is off by
// any skew in [-10s, 10s]; NotBefore is the host's now plus that delay.
// Without the Date the same answer is measured against the host's clock.
func TestDecideForIgnoresHostSkew(t *testing.T) {
	t.Parallel()
	layouts := []string{layoutIMF, layoutRFC850, layoutASCTime}
	rapid.Check(t, func(t *rapid.T) {
		vendorNow := genNow().Draw(t, "vendorNow")
		skew := time.Duration(rapid.Int64Range(-int64(10*time.Second), int64(10*time.Second)).Draw(t, "skew"))
		hostNow := vendorNow.Add(skew)
		p := genPolicy(hostNow).Draw(t, "policy")
		delay := time.Duration(rapid.Int64Range(1, 3*86400).Draw(t, "delaySeconds")) * time.Second
		retryAfter := vendorNow.Add(delay).Format(rapid.SampledFrom(layouts).Draw(t, "retryAfterLayout"))
		date := vendorNow.Format(rapid.SampledFrom(layouts).Draw(t, "dateLayout"))
		attempt := genAttempt().Draw(t, "attempt")

		d := p.DecideFor(retryAfter, true, date, attempt)
		checkDecision(t, p, hostNow, d)
		if d.Source != SourceRetryAfter || d.Requested != delay || d.DateReference != ReferenceDateHeader || !d.Form.IsDate() {
			t.Fatalf("DecideFor(%q, Date %q) with host skew %v = %v (requested %v), want requested %v against the Date header",
				retryAfter, date, skew, d, d.Requested, delay)
		}
		if want := min(delay, p.MaxDelay); d.Delay != want {
			t.Fatalf("Delay %v, want %v", d.Delay, want)
		}

		// The host's clock alone sees the date skewed.
		hostOnly := p.DecideFor(retryAfter, true, "", attempt)
		checkDecision(t, p, hostNow, hostOnly)
		if hostOnly.DateReference != ReferenceHostClock {
			t.Fatalf("without a Date: DateReference %q", hostOnly.DateReference)
		}
		if want := vendorNow.Truncate(time.Second).Add(delay).Sub(hostNow); want > 0 && hostOnly.Requested != want {
			t.Fatalf("without a Date: requested %v, want %v", hostOnly.Requested, want)
		}
	})
}
