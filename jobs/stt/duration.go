package stt

import (
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// durationUnits are the units parseVendorDelay accepts, lower case.
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "nsec": time.Nanosecond, "nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
	"us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond, // micro sign U+00B5, Greek mu U+03BC
	"usec": time.Microsecond, "microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
}

// maxMagnitude is the magnitude of math.MinInt64, the largest a parsed
// delay can be before it saturates.
const maxMagnitude = uint64(1) << 63

// parseVendorDelay reads a delay from a vendor header: a Go-like duration
// such as OpenAI's x-ratelimit-reset-requests ("6m0s", "1s", "20ms",
// "1h2m3.5s", "1.5µs"), or a bare number such as retry-after-ms ("1500",
// "20.5"), which is in units of bare.
//
// It is tolerant where time.ParseDuration is strict: surrounding white
// space and spaces between components ("1m 30s"), any letter case ("20MS"),
// the micro sign or the Greek mu, long unit names ("sec", "minutes"), and a
// bare number. It agrees with time.ParseDuration on every string that
// function accepts, except that a value too large for a time.Duration
// saturates at math.MaxInt64 (math.MinInt64 when negative) instead of
// failing: a vendor asking for a very long wait is asking for the longest
// wait, which the worker's policy clamps. A negative value is returned as
// such, for the policy to refuse. ok is false for anything else: empty,
// no digits, an unknown unit, a bare number among components, NaN or
// infinity.
func parseVendorDelay(raw string, bare time.Duration) (d time.Duration, ok bool) {
	s := strings.TrimSpace(raw)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var total uint64
	for first := true; s != ""; first = false {
		// The number: digits, optionally a point and more digits.
		var (
			whole, frac   uint64
			scale         = 1.0
			overflow      bool
			before, after bool
		)
		whole, s, overflow, before = leadingInt(s)
		if s != "" && s[0] == '.' {
			frac, scale, s, after = leadingFraction(s[1:])
		}
		if !before && !after {
			return 0, false
		}
		// The unit, perhaps after spaces: a run of letters, or none for a
		// lone bare number.
		s = strings.TrimLeft(s, " \t")
		end := 0
		for end < len(s) {
			r, size := utf8.DecodeRuneInString(s[end:])
			if !unicode.IsLetter(r) {
				break
			}
			end += size
		}
		unitName := strings.ToLower(s[:end])
		s = s[end:]
		var unit time.Duration
		if unitName == "" {
			if !first || strings.TrimSpace(s) != "" {
				return 0, false
			}
			unit = bare
		} else {
			var known bool
			if unit, known = durationUnits[unitName]; !known {
				return 0, false
			}
		}
		s = strings.TrimLeft(s, " \t")

		u := uint64(unit)
		if overflow || whole > maxMagnitude/u {
			total = maxMagnitude
			continue // keep validating the rest of the string
		}
		v := whole * u
		if frac > 0 {
			v += uint64(float64(frac) * (float64(u) / scale))
		}
		if v > maxMagnitude || total > maxMagnitude-v {
			total = maxMagnitude
			continue
		}
		total += v
	}
	switch {
	case neg && total >= maxMagnitude:
		return math.MinInt64, true
	case neg:
		return -time.Duration(total), true
	case total > math.MaxInt64:
		return math.MaxInt64, true
	}
	return time.Duration(total), true
}

// leadingInt consumes leading decimal digits. overflow reports a value of
// 2^63 or more; any reports that there was at least one digit.
func leadingInt(s string) (x uint64, rest string, overflow, any bool) {
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if x > (maxMagnitude-1)/10 {
			overflow = true
			continue
		}
		x = x*10 + uint64(s[i]-'0')
		if x >= maxMagnitude {
			overflow = true
		}
	}
	return x, s[i:], overflow, i > 0
}

// leadingFraction consumes the digits after a decimal point. It stops
// adding precision once more digits could overflow, so it never fails:
// f/scale is the fraction's value.
func leadingFraction(s string) (f uint64, scale float64, rest string, any bool) {
	scale = 1
	i := 0
	full := false
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if full {
			continue
		}
		if f > (maxMagnitude-1)/10 {
			full = true
			continue
		}
		next := f*10 + uint64(s[i]-'0')
		if next > maxMagnitude {
			full = true
			continue
		}
		f = next
		scale *= 10
	}
	return f, scale, s[i:], i > 0
}
