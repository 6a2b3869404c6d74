package stt

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseVendorDelay(t *testing.T) {
	t.Parallel()
	const none = time.Duration(-1 << 62) // marks "ok false" in the table
	tests := []struct {
		raw  string
		bare time.Duration
		want time.Duration
	}{
		// OpenAI's x-ratelimit-reset-* values.
		{"6m0s", time.Second, 6 * time.Minute},
		{"1s", time.Second, time.Second},
		{"20ms", time.Second, 20 * time.Millisecond},
		{"12ms", time.Second, 12 * time.Millisecond},
		{"1h2m3.5s", time.Second, time.Hour + 2*time.Minute + 3500*time.Millisecond},
		{"8.64s", time.Second, 8640 * time.Millisecond},
		{"0s", time.Second, 0},
		{"1.5µs", time.Second, 1500 * time.Nanosecond},
		{"1.5μs", time.Second, 1500 * time.Nanosecond}, // Greek mu
		{"7us", time.Second, 7 * time.Microsecond},
		{"3ns", time.Second, 3},
		// Tolerance.
		{"  6m0s\t", time.Second, 6 * time.Minute},
		{"1m 30s", time.Second, 90 * time.Second},
		{"20MS", time.Second, 20 * time.Millisecond},
		{"2H", time.Second, 2 * time.Hour},
		{"5 sec", time.Second, 5 * time.Second},
		{"2 minutes", time.Second, 2 * time.Minute},
		{"1.s", time.Second, time.Second},
		{".5s", time.Second, 500 * time.Millisecond},
		{"+3s", time.Second, 3 * time.Second},
		{"1s1s", time.Second, 2 * time.Second},
		// Bare numbers: retry-after-ms, or seconds for the reset headers.
		{"1500", time.Millisecond, 1500 * time.Millisecond},
		{"20.5", time.Millisecond, 20500 * time.Microsecond},
		{" 17 ", time.Second, 17 * time.Second},
		{"0", time.Millisecond, 0},
		{"0.0001", time.Millisecond, 100},
		// Negative values are returned for the policy to refuse.
		{"-250", time.Millisecond, -250 * time.Millisecond},
		{"-1s", time.Second, -time.Second},
		// Too large: saturated.
		{"9999999999h", time.Second, math.MaxInt64},
		{"99999999999999999999999", time.Millisecond, math.MaxInt64},
		{"-99999999999999999999999", time.Millisecond, math.MinInt64},
		{"9223372036854775807ns", time.Second, math.MaxInt64},
		{"9223372036854775808ns", time.Second, math.MaxInt64},
		{"-9223372036854775808ns", time.Second, math.MinInt64},
		{"2562047h47m16.854775807s", time.Second, math.MaxInt64},
		{"2562047h47m16.854775808s", time.Second, math.MaxInt64},
		{"1s9223372036854775807ns", time.Second, math.MaxInt64},
		// Malformed.
		{"", time.Second, none},
		{"   ", time.Second, none},
		{"-", time.Second, none},
		{".", time.Second, none},
		{"s", time.Second, none},
		{".s", time.Second, none},
		{"1d", time.Second, none},
		{"1 fortnight", time.Second, none},
		{"1m30", time.Second, none},
		{"30 1m", time.Second, none},
		{"NaN", time.Millisecond, none},
		{"Inf", time.Millisecond, none},
		{"1e3", time.Millisecond, none},
		{"0x10", time.Millisecond, none},
		{"1,5s", time.Second, none},
		{"--1s", time.Second, none},
		{"1s-", time.Second, none},
		{"soon", time.Second, none},
	}
	for _, tt := range tests {
		got, ok := parseVendorDelay(tt.raw, tt.bare)
		switch {
		case tt.want == none && ok:
			t.Errorf("parseVendorDelay(%q) = %v, want not ok", tt.raw, got)
		case tt.want != none && (!ok || got != tt.want):
			t.Errorf("parseVendorDelay(%q, %v) = %v, %v; want %v", tt.raw, tt.bare, got, ok, tt.want)
		}
	}
}

// genDuration draws durations across the whole range, often small.
func genDuration() *rapid.Generator[time.Duration] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) time.Duration { return time.Duration(rapid.Int64().Draw(t, "any")) }),
		rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.Int64Range(-int64(24*time.Hour), int64(24*time.Hour)).Draw(t, "day"))
		}),
		rapid.Custom(func(t *rapid.T) time.Duration {
			unit := rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour}).Draw(t, "unit")
			return unit * time.Duration(rapid.Int64Range(0, 10_000).Draw(t, "n"))
		}),
	)
}

// TestParseVendorDelayRoundTrip: every Duration's own String parses back
// to itself, in any letter case.
func TestParseVendorDelayRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		d := genDuration().Draw(t, "d")
		s := d.String()
		if rapid.Bool().Draw(t, "upper") {
			s = strings.ToUpper(s)
		}
		got, ok := parseVendorDelay(s, time.Second)
		if !ok || got != d {
			t.Fatalf("parseVendorDelay(%q) = %v, %v; want %v", s, got, ok, d)
		}
	})
}

// genDurationString draws strings in and near time.ParseDuration's grammar.
func genDurationString() *rapid.Generator[string] {
	component := rapid.Custom(func(t *rapid.T) string {
		var b strings.Builder
		b.WriteString(rapid.StringMatching(`[0-9]{0,22}`).Draw(t, "int"))
		if rapid.Bool().Draw(t, "point") {
			b.WriteString(".")
			b.WriteString(rapid.StringMatching(`[0-9]{0,22}`).Draw(t, "frac"))
		}
		b.WriteString(rapid.SampledFrom([]string{"ns", "us", "µs", "μs", "ms", "s", "m", "h", "", "d", "x"}).Draw(t, "unit"))
		return b.String()
	})
	return rapid.Custom(func(t *rapid.T) string {
		s := rapid.SampledFrom([]string{"", "", "-", "+"}).Draw(t, "sign")
		for _, c := range rapid.SliceOfN(component, 1, 4).Draw(t, "components") {
			s += c
		}
		return s
	})
}

// TestParseVendorDelayAgreesWithTime: wherever time.ParseDuration accepts
// a string, parseVendorDelay accepts it with the same value; where it
// refuses only for overflow, parseVendorDelay saturates.
func TestParseVendorDelayAgreesWithTime(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genDurationString().Draw(t, "s")
		checkAgainstTime(t, s)
	})
}

// checkAgainstTime is the differential property, shared with the fuzz
// target.
func checkAgainstTime(t interface{ Fatalf(string, ...any) }, s string) {
	got, ok := parseVendorDelay(s, time.Second)
	want, err := time.ParseDuration(s)
	if err == nil {
		if !ok || got != want {
			t.Fatalf("parseVendorDelay(%q) = %v, %v; time.ParseDuration says %v", s, got, ok, want)
		}
		return
	}
	if ok && strictGrammar(s) && got != math.MaxInt64 && got != math.MinInt64 && !bareNumber(s) {
		// A string in time.ParseDuration's own grammar that it refuses:
		// only overflow (saturated) or a bare number may be accepted.
		t.Fatalf("parseVendorDelay(%q) = %v, but time.ParseDuration refuses it: %v", s, got, err)
	}
}

// strictGrammar reports a string that uses none of parseVendorDelay's
// tolerances: no white space, no upper case, only time.ParseDuration's
// units.
func strictGrammar(s string) bool {
	units := map[string]bool{"ns": true, "us": true, "µs": true, "μs": true, "ms": true, "s": true, "m": true, "h": true}
	unit := ""
	for _, r := range s + "0" { // the sentinel digit ends a trailing unit
		switch {
		case r >= '0' && r <= '9' || r == '.' || r == '+' || r == '-':
			if unit != "" && !units[unit] {
				return false
			}
			unit = ""
		case r == ' ' || r == '\t' || r >= 'A' && r <= 'Z':
			return false
		default:
			unit += string(r)
		}
	}
	return true
}

// bareNumber reports a string that is one signed decimal number.
func bareNumber(s string) bool {
	s = strings.TrimLeft(strings.TrimSpace(s), "+-")
	if s == "" || s == "." {
		return false
	}
	return strings.Trim(s, "0123456789.") == "" && strings.Count(s, ".") <= 1
}

// TestParseVendorDelayBareMilliseconds: a bare number of milliseconds, as
// retry-after-ms sends it, is exact to the nanosecond.
func TestParseVendorDelayBareMilliseconds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ms := rapid.Int64Range(0, 1e9).Draw(t, "ms")
		micros := rapid.Int64Range(0, 999_999).Draw(t, "frac")
		s := strconv.FormatInt(ms, 10) + "." + strconv.FormatInt(1e6+micros, 10)[1:]
		want := time.Duration(ms)*time.Millisecond + time.Duration(micros)
		got, ok := parseVendorDelay(s, time.Millisecond)
		if !ok || got != want {
			t.Fatalf("parseVendorDelay(%q) = %v, %v; want %v", s, got, ok, want)
		}
	})
}

// FuzzParseVendorDelay: no input panics; the result agrees with
// time.ParseDuration where that accepts the input; letter case and
// surrounding space never matter; a parsed value prints and parses back.
func FuzzParseVendorDelay(f *testing.F) {
	for _, seed := range []string{
		"6m0s", "1s", "20ms", "1h2m3.5s", "1.5µs", "1500", "20.5", "-250", "", " ", ".", "-.s",
		"9223372036854775808ns", "2562047h47m16.854775808s", "1m 30s", "NaN", "1e3", "0.000000000000000000001s",
		"99999999999999999999.99999999999999999999h",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseVendorDelay(s, time.Second)
		checkAgainstTime(t, s)
		for _, variant := range []string{strings.ToLower(s), " \t" + s + " "} {
			d2, ok2 := parseVendorDelay(variant, time.Second)
			if ok2 != ok || d2 != d {
				t.Fatalf("parseVendorDelay(%q) = %v, %v but parseVendorDelay(%q) = %v, %v", s, d, ok, variant, d2, ok2)
			}
		}
		if ok {
			if back, ok := parseVendorDelay(d.String(), time.Second); !ok || back != d {
				t.Fatalf("%q parsed to %v, whose String parses to %v, %v", s, d, back, ok)
			}
		}
	})
}
