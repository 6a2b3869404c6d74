package retryafter

import (
	"fmt"
	"strings"
	"time"
)

// The HTTP-date grammar of RFC 9110 §5.6.7, case-sensitive:
//
//	IMF-fixdate  = day-name "," SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"
//	rfc850-date  = day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"
//	asctime-date = day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT
//	time-of-day  = 2DIGIT ":" 2DIGIT ":" 2DIGIT   ; 00:00:00 - 23:59:60 (leap second)

var (
	dayNames     = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	longDayNames = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	monthNames   = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

const notHTTPDate = "neither delay-seconds nor an HTTP-date"

// dateFields are the fields of an HTTP-date as written, before validation.
type dateFields struct {
	year, day            int
	month                time.Month
	hour, minute, second int
}

// parseHTTPDate parses s (already trimmed) as an HTTP-date. On success it
// returns the form and the instant in UTC; on failure form is "" and detail
// says what was wrong.
func parseHTTPDate(s string, now time.Time) (form Form, date time.Time, detail string) {
	var f dateFields
	comma := strings.IndexByte(s, ',')
	// The day name picks the form, so that the detail of an error speaks
	// about the form the sender evidently meant.
	switch {
	case comma == 3 && oneOf(s[:3], dayNames):
		form, detail = FormIMFFixdate, scanIMFFixdate(s, &f)
	case comma > 3 && oneOf(s[:comma], longDayNames):
		form, detail = FormRFC850, scanRFC850(s[:comma], s[comma:], &f, now)
	case len(s) > 3 && s[3] == ' ' && oneOf(s[:3], dayNames):
		form, detail = FormASCTime, scanASCTime(s, &f)
	default:
		return "", time.Time{}, notHTTPDate
	}
	if detail == "" {
		detail = f.check()
	}
	if detail != "" {
		return "", time.Time{}, detail
	}
	// time.Date turns second 60 into the first second of the next minute.
	return form, time.Date(f.year, f.month, f.day, f.hour, f.minute, f.second, 0, time.UTC), ""
}

// scanIMFFixdate reads "Sun, 06 Nov 1994 08:49:37 GMT".
func scanIMFFixdate(s string, f *dateFields) string {
	const layout = "Sun, 06 Nov 1994 08:49:37 GMT"
	if len(s) != len(layout) || !oneOf(s[0:3], dayNames) || s[3:5] != ", " ||
		s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || s[25] != ' ' {
		return "malformed IMF-fixdate, want like " + layout
	}
	ok := scanNumber(s[5:7], &f.day) && scanMonth(s[8:11], &f.month) &&
		scanNumber(s[12:16], &f.year) && scanTimeOfDay(s[17:25], f)
	if !ok {
		return "malformed IMF-fixdate, want like " + layout
	}
	if s[26:] != "GMT" {
		return "HTTP-date must be in GMT"
	}
	return ""
}

// scanRFC850 reads "Sunday, 06-Nov-94 08:49:37 GMT", split at the comma into
// day name and rest. The two-digit year is resolved against now.
func scanRFC850(dayName, rest string, f *dateFields, now time.Time) string {
	const layout = "Sunday, 06-Nov-94 08:49:37 GMT"
	const restLayout = ", 06-Nov-94 08:49:37 GMT"
	if len(rest) != len(restLayout) || !oneOf(dayName, longDayNames) || rest[0:2] != ", " ||
		rest[4] != '-' || rest[8] != '-' || rest[11] != ' ' || rest[20] != ' ' {
		return "malformed RFC 850 date, want like " + layout
	}
	var yy int
	ok := scanNumber(rest[2:4], &f.day) && scanMonth(rest[5:8], &f.month) &&
		scanNumber(rest[9:11], &yy) && scanTimeOfDay(rest[12:20], f)
	if !ok {
		return "malformed RFC 850 date, want like " + layout
	}
	if rest[21:] != "GMT" {
		return "HTTP-date must be in GMT"
	}
	f.year = resolveTwoDigitYear(yy, f, now)
	return ""
}

// scanASCTime reads "Sun Nov  6 08:49:37 1994"; the day is space-padded
// (" 6") or two digits ("06", "16").
func scanASCTime(s string, f *dateFields) string {
	const layout = "Sun Nov  6 08:49:37 1994"
	if len(s) != len(layout) || !oneOf(s[0:3], dayNames) || s[3] != ' ' ||
		s[7] != ' ' || s[10] != ' ' || s[19] != ' ' {
		return "malformed asctime date, want like " + layout
	}
	day := s[8:10]
	if day[0] == ' ' {
		day = day[1:]
	}
	ok := scanMonth(s[4:7], &f.month) && scanNumber(day, &f.day) &&
		scanTimeOfDay(s[11:19], f) && scanNumber(s[20:24], &f.year)
	if !ok {
		return "malformed asctime date, want like " + layout
	}
	return ""
}

// scanTimeOfDay reads "08:49:37" without range checks.
func scanTimeOfDay(s string, f *dateFields) bool {
	return len(s) == 8 && s[2] == ':' && s[5] == ':' &&
		scanNumber(s[0:2], &f.hour) && scanNumber(s[3:5], &f.minute) && scanNumber(s[6:8], &f.second)
}

// scanNumber reads s, which must be all ASCII digits, into *n. Callers pass
// at most four digits.
func scanNumber(s string, n *int) bool {
	if s == "" {
		return false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
		v = v*10 + int(s[i]-'0')
	}
	*n = v
	return true
}

func scanMonth(s string, m *time.Month) bool {
	for i, name := range monthNames {
		if s == name {
			*m = time.Month(i + 1)
			return true
		}
	}
	return false
}

func oneOf(s string, names []string) bool {
	for _, name := range names {
		if s == name {
			return true
		}
	}
	return false
}

// check validates the ranges RFC 9110 allows: time-of-day 00:00:00 to
// 23:59:60 and a day that exists in its month and year.
func (f *dateFields) check() string {
	switch {
	case f.hour > 23 || f.minute > 59 || f.second > 60:
		return fmt.Sprintf("time of day %02d:%02d:%02d is out of range", f.hour, f.minute, f.second)
	case f.day < 1 || f.day > daysIn(f.month, f.year):
		return fmt.Sprintf("day %d does not exist in %s %d", f.day, monthNames[f.month-1], f.year)
	}
	return ""
}

func daysIn(m time.Month, year int) int {
	switch m {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// resolveTwoDigitYear applies RFC 9110 §5.6.7: a timestamp in rfc850-date
// format that appears to be more than 50 years in the future means the most
// recent year in the past with the same last two digits. Equivalently: the
// latest year ending in yy whose date (month, day and time of f) is not more
// than 50 years after now. The comparison is field by field, so that a date
// such as 29 Feb is compared as written, before its validity is checked for
// the chosen year.
func resolveTwoDigitYear(yy int, f *dateFields, now time.Time) int {
	now = now.UTC()
	limitYear := now.Year() + 50
	year := limitYear - ((limitYear-yy)%100+100)%100
	limit := dateFields{year: limitYear, month: now.Month(), day: now.Day(),
		hour: now.Hour(), minute: now.Minute(), second: now.Second()}
	candidate := *f
	candidate.year = year
	if candidate.after(limit) {
		year -= 100
	}
	return year
}

// after reports whether f is later than g, comparing fields from the year
// down to the second. Fractions of a second of now are ignored, which is
// right: a whole-second date equal to the truncated limit is not after the
// limit itself.
func (f dateFields) after(g dateFields) bool {
	a := [...]int{f.year, int(f.month), f.day, f.hour, f.minute, f.second}
	b := [...]int{g.year, int(g.month), g.day, g.hour, g.minute, g.second}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}
