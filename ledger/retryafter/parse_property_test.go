package retryafter

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Layouts in Go's notation, used to generate valid inputs with a formatter
// that shares no code with the parser.
const (
	layoutIMF     = "Mon, 02 Jan 2006 15:04:05 GMT"
	layoutRFC850  = "Monday, 02-Jan-06 15:04:05 GMT"
	layoutASCTime = "Mon Jan _2 15:04:05 2006"
)

var (
	minModelNow = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxModelNow = time.Date(9000, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	minInstant  = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxInstant  = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// genNow draws a "now" inside the range the model supports, often close to
// today, with a random fraction of a second.
func genNow() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		lo, hi := minModelNow.Unix(), maxModelNow.Unix()
		if rapid.Bool().Draw(t, "nearToday") {
			lo, hi = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		}
		sec := rapid.Int64Range(lo, hi).Draw(t, "nowSec")
		nsec := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 999_999_999)).Draw(t, "nowNsec")
		return time.Unix(sec, nsec).UTC()
	})
}

// genInstant draws a whole-second instant anywhere in 4-digit years, or
// close to now.
func genInstant(now time.Time) *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		lo, hi := minInstant.Unix(), maxInstant.Unix()
		switch rapid.IntRange(0, 2).Draw(t, "instantRange") {
		case 1: // within a century of now
			lo, hi = max(lo, now.Unix()-100*366*86400), min(hi, now.Unix()+100*366*86400)
		case 2: // within a day of now
			lo, hi = max(lo, now.Unix()-86400), min(hi, now.Unix()+86400)
		}
		return time.Unix(rapid.Int64Range(lo, hi).Draw(t, "instant"), 0).UTC()
	})
}

// junkRunes are characters that make near-misses of the grammar likely.
var junkRunes = []rune("0123456789 \t,:-.+GMTUCSunMonTueWedThuFriSatJanFebMarNovDecday\n\u00a0")

// genRaw draws a Retry-After value: a valid one of each form, a number-like
// string, a mutation of a valid value, or junk, with optional whitespace.
func genRaw(now time.Time) *rapid.Generator[string] {
	valid := rapid.Custom(func(t *rapid.T) string {
		at := genInstant(now).Draw(t, "at")
		switch rapid.IntRange(0, 3).Draw(t, "form") {
		case 0:
			return rapid.StringMatching(`[0-9]{1,25}`).Draw(t, "digits")
		case 1:
			return at.Format(layoutIMF)
		case 2:
			return at.Format(layoutRFC850)
		default:
			return at.Format(layoutASCTime)
		}
	})
	numeric := rapid.StringMatching(`[-+]{0,2}[0-9]{0,12}\.?[0-9]{0,3}`)
	mutated := rapid.Custom(func(t *rapid.T) string {
		r := []rune(valid.Draw(t, "base"))
		n := rapid.IntRange(1, 3).Draw(t, "mutations")
		for range n {
			i := rapid.IntRange(0, len(r)).Draw(t, "at")
			c := rapid.RuneFrom(junkRunes).Draw(t, "rune")
			switch op := rapid.IntRange(0, 2).Draw(t, "op"); {
			case op == 0 && i < len(r):
				r[i] = c
			case op == 1 && i < len(r):
				r = append(r[:i], r[i+1:]...)
			default:
				r = append(r[:i], append([]rune{c}, r[i:]...)...)
			}
		}
		return string(r)
	})
	junk := rapid.OneOf(rapid.StringOf(rapid.RuneFrom(junkRunes)), rapid.String())
	return rapid.Custom(func(t *rapid.T) string {
		var s string
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			s = valid.Draw(t, "valid")
		case 1:
			s = numeric.Draw(t, "numeric")
		case 2:
			s = mutated.Draw(t, "mutated")
		default:
			s = junk.Draw(t, "junk")
		}
		ws := rapid.StringMatching(`[ \t]{0,3}`)
		return ws.Draw(t, "before") + s + ws.Draw(t, "after")
	})
}

// TestParseMatchesModel compares Parse with the reference model on valid
// values of every form, number-like strings, mutations and junk.
func TestParseMatchesModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := genNow().Draw(t, "now")
		raw := genRaw(now).Draw(t, "raw")
		v, err := Parse(raw, now)
		checkParseInvariants(t, raw, now, v, err)
		if got, want := resultOf(v, err), modelParse(raw, now); !got.equal(want) {
			t.Fatalf("Parse(%q, %s) = %v, model says %v", raw, now.Format(time.RFC3339Nano), got, want)
		}
	})
}

// TestParseFormattedInstants checks that every instant formatted in each
// form parses back to itself (RFC 850: to the year the 50-year rule picks).
func TestParseFormattedInstants(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := genNow().Draw(t, "now")
		at := genInstant(now).Draw(t, "at")
		for _, tc := range []struct {
			layout string
			form   Form
		}{{layoutIMF, FormIMFFixdate}, {layoutRFC850, FormRFC850}, {layoutASCTime, FormASCTime}} {
			raw := at.Format(tc.layout)
			v, err := Parse(raw, now)
			if tc.form == FormRFC850 {
				want := modelParse(raw, now)
				if got := resultOf(v, err); !got.equal(want) {
					t.Fatalf("Parse(%q) = %v, model says %v", raw, got, want)
				}
				if err == nil && (v.Date.Year()-at.Year())%100 != 0 {
					t.Fatalf("Parse(%q) year %d does not end like %d", raw, v.Date.Year(), at.Year())
				}
				if err == nil && v.Date.Sub(now) > time.Duration(50*366*24)*time.Hour {
					t.Fatalf("Parse(%q) = %v, more than 50 years after now %v", raw, v.Date, now)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", raw, err)
			}
			if v.Form != tc.form || !v.Date.Equal(at) {
				t.Fatalf("Parse(%q) = %s %v, want %s %v", raw, v.Form, v.Date, tc.form, at)
			}
		}
	})
}

// TestParseDigits checks that any digit string parses as its value in
// seconds, or as Overflow when that does not fit a Duration.
func TestParseDigits(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64Range(0, math.MaxInt64).Draw(t, "n")
		zeros := strings.Repeat("0", rapid.IntRange(0, 5).Draw(t, "zeros"))
		raw := zeros + strconv.FormatInt(n, 10)
		v, err := Parse(raw, testNow)
		if err != nil {
			t.Fatalf("Parse(%q): %v", raw, err)
		}
		if n > math.MaxInt64/int64(time.Second) {
			if !v.Overflow || v.Delay != math.MaxInt64 {
				t.Fatalf("Parse(%q) = %+v, want overflow", raw, v)
			}
			return
		}
		if v.Overflow || v.Delay != time.Duration(n)*time.Second {
			t.Fatalf("Parse(%q) = %+v, want %ds", raw, v, n)
		}
	})
}

// checkParseInvariants holds for every input: an error XOR a value, typed
// errors, non-negative delay-seconds, dates in UTC on whole seconds.
func checkParseInvariants(t interface{ Fatalf(string, ...any) }, raw string, now time.Time, v Value, err error) {
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("Parse(%q) error is %T, want *ParseError", raw, err)
		}
		if pe.Raw != raw {
			t.Fatalf("ParseError.Raw = %q, want %q", pe.Raw, raw)
		}
		switch pe.Reason {
		case ReasonEmpty, ReasonNegative, ReasonFractional, ReasonNonNumeric:
		default:
			t.Fatalf("Parse(%q) reason %q is not a known Reason", raw, pe.Reason)
		}
		if v != (Value{}) {
			t.Fatalf("Parse(%q) returned both %+v and %v", raw, v, err)
		}
		return
	}
	if v.Raw != raw {
		t.Fatalf("Value.Raw = %q, want %q", v.Raw, raw)
	}
	if v.Date.Location() != time.UTC {
		t.Fatalf("Parse(%q) Date %v is not UTC", raw, v.Date)
	}
	switch v.Form {
	case FormDelaySeconds:
		if v.Delay < 0 || !v.Date.IsZero() {
			t.Fatalf("Parse(%q) = %+v: delay-seconds must be >= 0 with no Date", raw, v)
		}
		if v.Overflow != (v.Delay == math.MaxInt64) {
			t.Fatalf("Parse(%q) = %+v: Overflow must mean Delay == MaxInt64", raw, v)
		}
	case FormIMFFixdate, FormRFC850, FormASCTime:
		if v.Date.Nanosecond() != 0 {
			t.Fatalf("Parse(%q) Date %v has a fraction of a second", raw, v.Date)
		}
		if !v.Overflow && v.Delay != v.Date.Sub(now) {
			t.Fatalf("Parse(%q) Delay %v, want Date-now %v", raw, v.Delay, v.Date.Sub(now))
		}
	default:
		t.Fatalf("Parse(%q) returned no error and Form %q", raw, v.Form)
	}
}
