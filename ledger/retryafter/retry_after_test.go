package retryafter

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()

	utc := func(y int, m time.Month, d, h, mi, s int) time.Time { return time.Date(y, m, d, h, mi, s, 0, time.UTC) }
	nov94 := utc(1994, time.November, 6, 8, 49, 37)

	type want struct {
		form     Form
		delay    time.Duration
		overflow bool
		date     time.Time
	}
	tests := []struct {
		name string
		raw  string
		want want
	}{
		// delay-seconds
		{"zero", "0", want{form: FormDelaySeconds}},
		{"seconds", "120", want{form: FormDelaySeconds, delay: 2 * time.Minute}},
		{"leading zeros", "0000120", want{form: FormDelaySeconds, delay: 2 * time.Minute}},
		{"many leading zeros", strings.Repeat("0", 40) + "1", want{form: FormDelaySeconds, delay: time.Second}},
		{"spaces and tabs around", " \t 120\t ", want{form: FormDelaySeconds, delay: 2 * time.Minute}},
		{"largest that fits", "9223372036", want{form: FormDelaySeconds, delay: 9223372036 * time.Second}},
		{"one past largest", "9223372037", want{form: FormDelaySeconds, delay: math.MaxInt64, overflow: true}},
		{"max int64 digits", "9223372036854775807", want{form: FormDelaySeconds, delay: math.MaxInt64, overflow: true}},
		{"huge digit string", strings.Repeat("9", 400), want{form: FormDelaySeconds, delay: math.MaxInt64, overflow: true}},

		// IMF-fixdate
		{"imf past", "Sun, 06 Nov 1994 08:49:37 GMT", want{form: FormIMFFixdate, delay: nov94.Sub(testNow), date: nov94}},
		{"imf future", "Sun, 01 Mar 2026 12:02:00 GMT", want{form: FormIMFFixdate, delay: 2 * time.Minute, date: utc(2026, 3, 1, 12, 2, 0)}},
		{"imf equal to now", "Sun, 01 Mar 2026 12:00:00 GMT", want{form: FormIMFFixdate, date: testNow}},
		{"imf whitespace", "\t Sun, 01 Mar 2026 12:02:00 GMT  ", want{form: FormIMFFixdate, delay: 2 * time.Minute, date: utc(2026, 3, 1, 12, 2, 0)}},
		{"imf weekday not checked", "Wed, 06 Nov 1994 08:49:37 GMT", want{form: FormIMFFixdate, delay: nov94.Sub(testNow), date: nov94}},
		{"imf leap day", "Thu, 29 Feb 2024 00:00:00 GMT", want{form: FormIMFFixdate, delay: utc(2024, 2, 29, 0, 0, 0).Sub(testNow), date: utc(2024, 2, 29, 0, 0, 0)}},
		{"imf leap day 2000", "Tue, 29 Feb 2000 00:00:00 GMT", want{form: FormIMFFixdate, delay: utc(2000, 2, 29, 0, 0, 0).Sub(testNow), date: utc(2000, 2, 29, 0, 0, 0)}},
		{"imf leap second", "Sun, 01 Mar 2026 12:01:60 GMT", want{form: FormIMFFixdate, delay: 2 * time.Minute, date: utc(2026, 3, 1, 12, 2, 0)}},
		{"imf end of day", "Sun, 01 Mar 2026 23:59:59 GMT", want{form: FormIMFFixdate, delay: 11*time.Hour + 59*time.Minute + 59*time.Second, date: utc(2026, 3, 1, 23, 59, 59)}},
		{"imf year 9999", "Fri, 31 Dec 9999 23:59:59 GMT", want{form: FormIMFFixdate, delay: math.MaxInt64, overflow: true, date: utc(9999, 12, 31, 23, 59, 59)}},
		{"imf year 0001", "Mon, 01 Jan 0001 00:00:00 GMT", want{form: FormIMFFixdate, delay: math.MinInt64, overflow: true, date: utc(1, 1, 1, 0, 0, 0)}},

		// RFC 850
		{"rfc850", "Sunday, 06-Nov-94 08:49:37 GMT", want{form: FormRFC850, delay: nov94.Sub(testNow), date: nov94}},
		{"rfc850 future", "Sunday, 01-Mar-26 12:02:00 GMT", want{form: FormRFC850, delay: 2 * time.Minute, date: utc(2026, 3, 1, 12, 2, 0)}},
		{"rfc850 weekday not checked", "Monday, 06-Nov-94 08:49:37 GMT", want{form: FormRFC850, delay: nov94.Sub(testNow), date: nov94}},
		{"rfc850 whitespace", " Sunday, 06-Nov-94 08:49:37 GMT\t", want{form: FormRFC850, delay: nov94.Sub(testNow), date: nov94}},

		// asctime
		{"asctime space-padded day", "Sun Nov  6 08:49:37 1994", want{form: FormASCTime, delay: nov94.Sub(testNow), date: nov94}},
		{"asctime two-digit day", "Sun Nov 06 08:49:37 1994", want{form: FormASCTime, delay: nov94.Sub(testNow), date: nov94}},
		{"asctime day 16", "Wed Nov 16 08:49:37 1994", want{form: FormASCTime, delay: utc(1994, 11, 16, 8, 49, 37).Sub(testNow), date: utc(1994, 11, 16, 8, 49, 37)}},
		{"asctime future", "Sun Mar  1 12:02:00 2026", want{form: FormASCTime, delay: 2 * time.Minute, date: utc(2026, 3, 1, 12, 2, 0)}},
		{"asctime weekday not checked", "Fri Nov  6 08:49:37 1994", want{form: FormASCTime, delay: nov94.Sub(testNow), date: nov94}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := Parse(tt.raw, testNow)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.raw, err)
			}
			got := want{form: v.Form, delay: v.Delay, overflow: v.Overflow, date: v.Date}
			if got.form != tt.want.form || got.delay != tt.want.delay || got.overflow != tt.want.overflow || !got.date.Equal(tt.want.date) {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.raw, got, tt.want)
			}
			if v.Raw != tt.raw {
				t.Errorf("Raw = %q, want %q", v.Raw, tt.raw)
			}
			if v.Date.Location() != time.UTC {
				t.Errorf("Date location = %v, want UTC", v.Date.Location())
			}
			if !v.Form.IsDate() && !v.Date.IsZero() {
				t.Errorf("Form %s with Date %v: Date must be zero for delay-seconds", v.Form, v.Date)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		raw    string
		reason Reason
		msg    string // substring of Error(), when set
	}{
		{"empty", "", ReasonEmpty, `retry-after "": empty value`},
		{"only spaces", "   ", ReasonEmpty, ""},
		{"only tabs and spaces", "\t \t", ReasonEmpty, ""},

		{"negative", "-1", ReasonNegative, `retry-after "-1": negative delays are not allowed`},
		{"negative zero", "-0", ReasonNegative, ""},
		{"negative with spaces", " -5 ", ReasonNegative, ""},
		{"negative fraction", "-1.5", ReasonNegative, ""},
		{"negative dot fraction", "-.5", ReasonNegative, ""},

		{"fractional", "1.5", ReasonFractional, `retry-after "1.5": fractional seconds are not allowed`},
		{"fractional zero", "0.0", ReasonFractional, ""},
		{"trailing dot", "1.", ReasonFractional, ""},
		{"leading dot", ".5", ReasonFractional, ""},

		{"plus sign", "+5", ReasonNonNumeric, `retry-after "+5": neither delay-seconds nor an HTTP-date`},
		{"unit suffix", "5s", ReasonNonNumeric, ""},
		{"hex", "0x10", ReasonNonNumeric, ""},
		{"exponent", "1e3", ReasonNonNumeric, ""},
		{"comma decimal", "1,5", ReasonNonNumeric, ""},
		{"two numbers", "1 2", ReasonNonNumeric, ""},
		{"double minus", "--1", ReasonNonNumeric, ""},
		{"lone minus", "-", ReasonNonNumeric, ""},
		{"lone dot", ".", ReasonNonNumeric, ""},
		{"two dots", "1.2.3", ReasonNonNumeric, ""},
		{"word", "soon", ReasonNonNumeric, ""},
		{"newline not trimmed", "\n5", ReasonNonNumeric, ""},
		{"non-breaking space not trimmed", "\u00a05", ReasonNonNumeric, ""},
		{"fullwidth digit", "\uff15", ReasonNonNumeric, ""},
		{"digits then junk", "120abc", ReasonNonNumeric, ""},

		{"imf UTC", "Sun, 06 Nov 1994 08:49:37 UTC", ReasonNonNumeric, "HTTP-date must be in GMT"},
		{"imf numeric zone", "Sun, 06 Nov 1994 08:49:37 +0000", ReasonNonNumeric, "malformed IMF-fixdate"},
		{"imf no zone", "Sun, 06 Nov 1994 08:49:37", ReasonNonNumeric, "malformed IMF-fixdate"},
		{"imf lowercase gmt", "Sun, 06 Nov 1994 08:49:37 gmt", ReasonNonNumeric, "GMT"},
		{"imf lowercase month", "Sun, 06 nov 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf lowercase day", "sun, 06 Nov 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf long day name", "Sunday, 06 Nov 1994 08:49:37 GMT", ReasonNonNumeric, "malformed RFC 850 date"},
		{"imf unknown day name", "Sux, 06 Nov 1994 08:49:37 GMT", ReasonNonNumeric, "neither delay-seconds nor an HTTP-date"},
		{"imf unknown month", "Sun, 06 Foo 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf one-digit day", "Sun, 6 Nov 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf two-digit year", "Sun, 06 Nov 94 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf day 31 of November", "Wed, 31 Nov 1994 08:49:37 GMT", ReasonNonNumeric, "day 31 does not exist in Nov 1994"},
		{"imf day 00", "Sun, 00 Nov 1994 08:49:37 GMT", ReasonNonNumeric, "day 0 does not exist"},
		{"imf day 32", "Sun, 32 Dec 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf 29 Feb non-leap", "Wed, 29 Feb 2023 00:00:00 GMT", ReasonNonNumeric, "day 29 does not exist in Feb 2023"},
		{"imf 29 Feb 1900", "Thu, 29 Feb 1900 00:00:00 GMT", ReasonNonNumeric, ""},
		{"imf hour 24", "Sun, 06 Nov 1994 24:00:00 GMT", ReasonNonNumeric, "time of day 24:00:00 is out of range"},
		{"imf minute 60", "Sun, 06 Nov 1994 08:60:00 GMT", ReasonNonNumeric, ""},
		{"imf second 61", "Sun, 06 Nov 1994 08:49:61 GMT", ReasonNonNumeric, ""},
		{"imf fractional second", "Sun, 06 Nov 1994 08:49:37.5 GMT", ReasonNonNumeric, ""},
		{"imf double space", "Sun,  06 Nov 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf missing comma", "Sun 06 Nov 1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"imf trailing junk", "Sun, 06 Nov 1994 08:49:37 GMTX", ReasonNonNumeric, ""},
		{"imf sign in year", "Sun, 06 Nov +994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"iso 8601", "1994-11-06T08:49:37Z", ReasonNonNumeric, ""},

		{"rfc850 UTC", "Sunday, 06-Nov-94 08:49:37 UTC", ReasonNonNumeric, "HTTP-date must be in GMT"},
		{"rfc850 no zone", "Sunday, 06-Nov-94 08:49:37", ReasonNonNumeric, ""},
		{"rfc850 short day name", "Sun, 06-Nov-94 08:49:37 GMT", ReasonNonNumeric, "malformed IMF-fixdate"},
		{"rfc850 four-digit year", "Sunday, 06-Nov-1994 08:49:37 GMT", ReasonNonNumeric, ""},
		{"rfc850 bad month", "Sunday, 06-Now-94 08:49:37 GMT", ReasonNonNumeric, ""},
		{"rfc850 day 31 of April", "Sunday, 31-Apr-94 08:49:37 GMT", ReasonNonNumeric, ""},

		{"asctime single space before day", "Sun Nov 6 08:49:37 1994", ReasonNonNumeric, "malformed asctime date"},
		{"asctime with zone", "Sun Nov  6 08:49:37 1994 GMT", ReasonNonNumeric, ""},
		{"asctime two-digit year", "Sun Nov  6 08:49:37 94", ReasonNonNumeric, ""},
		{"asctime day 0", "Sun Nov  0 08:49:37 1994", ReasonNonNumeric, ""},
		{"asctime bad hour", "Sun Nov  6 28:49:37 1994", ReasonNonNumeric, ""},
		{"asctime zero-padded by space in two digits", "Sun Nov 1  08:49:37 1994", ReasonNonNumeric, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := Parse(tt.raw, testNow)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error %s", tt.raw, v, tt.reason)
			}
			if v != (Value{}) {
				t.Errorf("Parse(%q) returned %+v with an error, want zero Value", tt.raw, v)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *ParseError", err)
			}
			if pe.Reason != tt.reason || pe.Raw != tt.raw {
				t.Errorf("ParseError{Raw: %q, Reason: %s}, want {Raw: %q, Reason: %s}", pe.Raw, pe.Reason, tt.raw, tt.reason)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), tt.msg)
			}
		})
	}
}

// TestParseTwoDigitYear checks the RFC 9110 §5.6.7 rule around the 50-year
// boundary: an RFC 850 year more than 50 years ahead of now means the most
// recent past year with the same last two digits.
func TestParseTwoDigitYear(t *testing.T) {
	t.Parallel()

	at := func(y int, m time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, m, d, h, mi, s, ns, time.UTC)
	}
	tests := []struct {
		name     string
		now      time.Time
		raw      string
		wantYear int // 0: want an error
	}{
		{"same year", testNow, "Sunday, 01-Mar-26 12:00:00 GMT", 2026},
		{"yy 00", testNow, "Saturday, 01-Jan-00 00:00:00 GMT", 2000},
		{"49 years ahead", testNow, "Monday, 01-Mar-75 12:00:00 GMT", 2075},
		{"exactly 50 years ahead", testNow, "Sunday, 01-Mar-76 12:00:00 GMT", 2076},
		{"50 years and one second ahead", testNow, "Sunday, 01-Mar-76 12:00:01 GMT", 1976},
		{"50 years less one second", testNow, "Sunday, 01-Mar-76 11:59:59 GMT", 2076},
		{"50 years and a day ahead", testNow, "Monday, 02-Mar-76 12:00:00 GMT", 1976},
		{"29 Feb of year 50 ahead", testNow, "Saturday, 29-Feb-76 23:59:59 GMT", 2076},
		{"51 years ahead", testNow, "Monday, 01-Mar-77 12:00:00 GMT", 1977},
		{"yy 99", testNow, "Friday, 31-Dec-99 23:59:59 GMT", 1999},
		{"fraction of now ignored at equality", at(2026, 3, 1, 12, 0, 0, 500_000_000), "Sunday, 01-Mar-76 12:00:00 GMT", 2076},
		{"fraction of now, one second later", at(2026, 3, 1, 12, 0, 0, 999_999_999), "Sunday, 01-Mar-76 12:00:01 GMT", 1976},
		{"now late in the century rolls forward", at(2080, 1, 1, 0, 0, 0, 0), "Monday, 01-Jan-10 00:00:00 GMT", 2110},
		{"now late in the century keeps past", at(2080, 1, 1, 0, 0, 0, 0), "Monday, 01-Jan-31 00:00:00 GMT", 2031},
		{"now in another zone", time.Date(2026, 3, 1, 7, 0, 0, 0, time.FixedZone("EST", -5*3600)), "Sunday, 01-Mar-76 12:00:00 GMT", 2076},
		{"29 Feb 00 in the past is 2000", testNow, "Tuesday, 29-Feb-00 00:00:00 GMT", 2000},
		{"29 Feb 00 resolved to 2100 does not exist", at(2060, 1, 1, 0, 0, 0, 0), "Monday, 29-Feb-00 00:00:00 GMT", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := Parse(tt.raw, tt.now)
			if tt.wantYear == 0 {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want error", tt.raw, v.Date)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.raw, err)
			}
			if v.Date.Year() != tt.wantYear {
				t.Errorf("Parse(%q) year = %d, want %d (date %v)", tt.raw, v.Date.Year(), tt.wantYear, v.Date)
			}
			if want := modelParse(tt.raw, tt.now); !want.equal(resultOf(v, err)) {
				t.Errorf("model disagrees: model %v, Parse %v", want, resultOf(v, err))
			}
		})
	}
}

func TestParseErrorMessageUnknownReason(t *testing.T) {
	t.Parallel()
	err := &ParseError{Raw: "x", Reason: "odd"}
	if got, want := err.Error(), `retry-after "x": unknown reason "odd"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
