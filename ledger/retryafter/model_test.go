package retryafter

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// This file is an independent reference model of Parse, written from the
// RFC 9110 grammar with regular expressions and big integers rather than
// the hand-written scanner of the package. Property and fuzz tests compare
// the two.

const (
	modelDay   = `(Mon|Tue|Wed|Thu|Fri|Sat|Sun)`
	modelMonth = `(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)`
	modelTime  = `([0-9]{2}):([0-9]{2}):([0-9]{2})`
)

var (
	modelDigits  = regexp.MustCompile(`^[0-9]+$`)
	modelNumber  = regexp.MustCompile(`^-?([0-9]+\.?[0-9]*|\.[0-9]+)$`)
	modelIMF     = regexp.MustCompile(`^` + modelDay + `, ([0-9]{2}) ` + modelMonth + ` ([0-9]{4}) ` + modelTime + ` GMT$`)
	modelRFC850  = regexp.MustCompile(`^(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), ([0-9]{2})-` + modelMonth + `-([0-9]{2}) ` + modelTime + ` GMT$`)
	modelASCTime = regexp.MustCompile(`^` + modelDay + ` ` + modelMonth + ` ([0-9]{2}| [0-9]) ` + modelTime + ` ([0-9]{4})$`)
)

// modelResult is what Parse must return: reason != "" for an error,
// otherwise the Value fields.
type modelResult struct {
	reason   Reason
	form     Form
	delay    time.Duration
	overflow bool
	date     time.Time
}

func (m modelResult) String() string {
	if m.reason != "" {
		return "error " + string(m.reason)
	}
	return fmt.Sprintf("%s delay=%d overflow=%v date=%s", m.form, int64(m.delay), m.overflow, m.date.Format(time.RFC3339))
}

// resultOf turns what Parse returned into a modelResult.
func resultOf(v Value, err error) modelResult {
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			return modelResult{reason: Reason(fmt.Sprintf("not a *ParseError: %T", err))}
		}
		return modelResult{reason: pe.Reason}
	}
	return modelResult{form: v.Form, delay: v.Delay, overflow: v.Overflow, date: v.Date}
}

func (m modelResult) equal(o modelResult) bool {
	return m.reason == o.reason && m.form == o.form && m.delay == o.delay &&
		m.overflow == o.overflow && m.date.Equal(o.date)
}

// modelParse requires now to lie in the years 1000 to 9000, so that every
// candidate RFC 850 year formats as four digits.
func modelParse(raw string, now time.Time) modelResult {
	s := strings.Trim(raw, " \t")
	switch {
	case s == "":
		return modelResult{reason: ReasonEmpty}
	case modelDigits.MatchString(s):
		n, _ := new(big.Int).SetString(s, 10)
		maxSeconds := new(big.Int).Quo(big.NewInt(math.MaxInt64), big.NewInt(1e9))
		if n.Cmp(maxSeconds) > 0 {
			return modelResult{form: FormDelaySeconds, delay: math.MaxInt64, overflow: true}
		}
		return modelResult{form: FormDelaySeconds, delay: time.Duration(n.Int64() * 1e9)}
	case modelNumber.MatchString(s) && s[0] == '-':
		return modelResult{reason: ReasonNegative}
	case modelNumber.MatchString(s):
		return modelResult{reason: ReasonFractional}
	}
	if m := modelIMF.FindStringSubmatch(s); m != nil {
		return modelDate(FormIMFFixdate, atoi(m[4]), m[3], atoi(m[2]), m[5:8], now)
	}
	if m := modelRFC850.FindStringSubmatch(s); m != nil {
		year := modelTwoDigitYear(atoi(m[4]), m[3], atoi(m[2]), m[5:8], now)
		return modelDate(FormRFC850, year, m[3], atoi(m[2]), m[5:8], now)
	}
	if m := modelASCTime.FindStringSubmatch(s); m != nil {
		return modelDate(FormASCTime, atoi(m[7]), m[2], atoi(strings.TrimSpace(m[3])), m[4:7], now)
	}
	return modelResult{reason: ReasonNonNumeric}
}

func modelDate(form Form, year int, month string, day int, hms []string, now time.Time) modelResult {
	mon := time.Month(strings.Index("JanFebMarAprMayJunJulAugSepOctNovDec", month)/3 + 1)
	h, mi, sec := atoi(hms[0]), atoi(hms[1]), atoi(hms[2])
	lastDay := time.Date(year, mon+1, 0, 0, 0, 0, 0, time.UTC).Day()
	if h > 23 || mi > 59 || sec > 60 || day < 1 || day > lastDay {
		return modelResult{reason: ReasonNonNumeric}
	}
	date := time.Date(year, mon, day, h, mi, sec, 0, time.UTC)
	// Exact difference in nanoseconds, then saturate.
	diff := new(big.Int).Mul(big.NewInt(date.Unix()-now.Unix()), big.NewInt(1e9))
	diff.Sub(diff, big.NewInt(int64(now.Nanosecond())))
	r := modelResult{form: form, date: date}
	switch {
	case diff.Cmp(big.NewInt(math.MaxInt64)) > 0:
		r.delay, r.overflow = math.MaxInt64, true
	case diff.Cmp(big.NewInt(math.MinInt64)) < 0:
		r.delay, r.overflow = math.MinInt64, true
	default:
		r.delay = time.Duration(diff.Int64())
	}
	return r
}

// modelTwoDigitYear searches down from far in the future for the first
// year ending in yy whose timestamp, compared as a zero-padded string, is
// not after now plus 50 years.
func modelTwoDigitYear(yy int, month string, day int, hms []string, now time.Time) int {
	now = now.UTC()
	mon := strings.Index("JanFebMarAprMayJunJulAugSepOctNovDec", month)/3 + 1
	stamp := func(y, mo, d int, h, mi, s string) string {
		return fmt.Sprintf("%04d-%02d-%02d %s:%s:%s", y, mo, d, h, mi, s)
	}
	limit := stamp(now.Year()+50, int(now.Month()), now.Day(),
		fmt.Sprintf("%02d", now.Hour()), fmt.Sprintf("%02d", now.Minute()), fmt.Sprintf("%02d", now.Second()))
	for y := now.Year() + 150; ; y-- {
		if y%100 == yy && stamp(y, mon, day, hms[0], hms[1], hms[2]) <= limit {
			return y
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
