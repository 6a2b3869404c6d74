package extract

import (
	"strconv"
	"strings"
	"time"
)

// ResolveDate resolves a spoken date phrase against ref, the call's start
// expressed in the tenant's time zone, and returns the first instant of that
// day in ref's location (midnight, or the end of the jump on a day whose
// clocks spring forward at midnight). ok is false when phrase is not one
// whole date phrase. Case, punctuation, "'s", a leading "on", "by", "for",
// "until", "till" or "due", and numbers spelled out are accepted.
//
// "Today" is ref's calendar day in ref's location: a call at 23:30 on
// Sunday in Chicago is a Sunday call even though it is Monday in UTC. Days
// are counted on the calendar (a DST change never shifts a date).
//
//   - "today", "tonight", "this morning/afternoon/evening", "end of day",
//     "end of the day", "EOD", "close of business", "COB", "end of
//     business": today. "end of day Friday", "EOD tomorrow": that day.
//   - "tomorrow" (+1), "the day after tomorrow" (+2), "in N days",
//     "in N weeks", "in a week" (N in digits or words up to twelve).
//   - "end of the week", "EOW": this Friday (the rule below); "end of next
//     week": next Friday; "end of the month", "EOM": the month's last day.
//   - A bare weekday, "Friday" (also "coming Friday", "this coming
//     Friday", "upcoming Friday"): the next Friday strictly after today, 1–7
//     days ahead. Said on a Friday, "by Friday" is a week later: a speaker
//     meaning today says "today".
//   - "this Friday", "Friday this week": the coming Friday or today, 0–6
//     days ahead.
//   - "next Friday", "Friday next week", "next week Friday": the Friday of
//     next week, weeks running Monday to Sunday (the business week): 1–13
//     days ahead. Said on Tuesday the 24th, "next Wednesday" is the 2nd, not
//     tomorrow; said on Friday, "next Monday" is in three days; said on a
//     weekend, the coming week is next week. "Friday after next": a week
//     after next Friday.
//   - A weekday followed by a date ("Tuesday, December 1st") is that date.
//   - "December 3rd", "Dec. 3", "December the third", "3rd of December", "3
//     December", "12/3": the next such day on or after today (this year, else
//     next year); with a year ("December 3rd, 2026", "12/3/26",
//     "2026-12-03") exactly that day. "May" needs an ordinal ("May 3rd") or a
//     comma, end or year after the number, since "may" is also a verb.
//   - "the 3rd", "the third": the next 3rd on or after today (a month
//     without a 31st is skipped). It must not be followed by a word other
//     than a time or a joining word ("the third load" is no date).
//   - Trailing "morning", "afternoon", "evening", "night", "EOD" are part of
//     the phrase ("tomorrow morning", "Friday EOD").
//
// Plain weekday abbreviations ("Mon", "Wed", "Sat", "Sun") are not dates:
// they are ordinary words too often; "Tues", "Weds", "Thur", "Thurs" are.
func ResolveDate(phrase string, ref time.Time) (time.Time, bool) {
	toks := tokenize(phrase)
	for len(toks) > 0 && !toks[len(toks)-1].isWord() {
		toks = toks[:len(toks)-1]
	}
	for len(toks) > 0 && (!toks[0].isWord() || datePrepositions[toks[0].low]) {
		toks = toks[1:]
	}
	m, ok := parseDate(toks, 0, ref)
	if !ok || m.end != len(toks) {
		return time.Time{}, false
	}
	return m.day, true
}

var datePrepositions = set("on", "by", "for", "until", "till", "due")

// partOfDay is what a date phrase says of the time of day.
type partOfDay int

const (
	partNone partOfDay = iota
	partAM             // "morning"
	partPM             // "afternoon", "evening", "tonight"
)

// dateMatch is one date phrase found at toks[start:end].
type dateMatch struct {
	start, end int
	day        time.Time // first instant of the day in ref's location
	part       partOfDay
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "tues": time.Tuesday,
	"wednesday": time.Wednesday, "weds": time.Wednesday, "thursday": time.Thursday, "thur": time.Thursday,
	"thurs": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

var months = map[string]time.Month{
	"january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
	"may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
	"september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
	"december": 12, "dec": 12,
}

// smallNumbers are the number words up to twelve; transcripts spell small
// numbers out ("between eight and ten am").
var smallNumbers = map[string]int{
	"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
	"nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}

var (
	cardinalDays = map[string]int{}
	ordinalDays  = map[string]int{}
)

func init() {
	ord := []string{"", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
		"tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
		"eighteenth", "nineteenth", "twentieth"}
	card := []string{"", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
		"nineteen", "twenty"}
	for i := 1; i <= 20; i++ {
		ordinalDays[ord[i]] = i
		cardinalDays[card[i]] = i
	}
	for i := 1; i <= 9; i++ {
		ordinalDays["twenty "+ord[i]] = 20 + i
		cardinalDays["twenty "+card[i]] = 20 + i
	}
	ordinalDays["thirtieth"] = 30
	cardinalDays["thirty"] = 30
	ordinalDays["thirty first"] = 31
	cardinalDays["thirty one"] = 31
}

// dayNumber reads a day of the month at toks[i]: "3", "03", "3rd", "third",
// "twenty-first", "twenty first", "thirty one". ordinal reports a suffix or
// an ordinal word.
func dayNumber(toks []token, i int) (day int, ordinal bool, n int, ok bool) {
	if i >= len(toks) {
		return 0, false, 0, false
	}
	w := toks[i].low
	digits := strings.TrimRight(w, "stndrh")
	if digits != w && len(w)-len(digits) == 2 {
		ordinal = true
	}
	if isDigits(digits) && len(digits) <= 2 && (ordinal || digits == w) {
		d, _ := strconv.Atoi(digits)
		return d, ordinal, 1, d >= 1 && d <= 31
	}
	// Words, possibly hyphenated or in two tokens.
	w = strings.ReplaceAll(w, "-", " ")
	if (w == "twenty" || w == "thirty") && i+1 < len(toks) {
		two := w + " " + toks[i+1].low
		if d, ok := ordinalDays[two]; ok {
			return d, true, 2, true
		}
		if d, ok := cardinalDays[two]; ok {
			return d, false, 2, true
		}
	}
	if d, ok := ordinalDays[w]; ok {
		return d, true, 1, true
	}
	if d, ok := cardinalDays[w]; ok {
		return d, false, 1, true
	}
	return 0, false, 0, false
}

// countNumber reads a count for "in N days": digits up to 366 or a word up
// to twelve, "a" and "a couple of" included.
func countNumber(toks []token, i int) (n, used int, ok bool) {
	if i >= len(toks) {
		return 0, 0, false
	}
	w := toks[i].low
	if isDigits(w) && len(w) <= 3 {
		v, _ := strconv.Atoi(w)
		return v, 1, v >= 0 && v <= 366
	}
	if v, ok := smallNumbers[w]; ok {
		return v, 1, true
	}
	if w == "a" || w == "an" {
		if i+2 < len(toks) && toks[i+1].low == "couple" && toks[i+2].low == "of" {
			return 2, 3, true
		}
		return 1, 1, true
	}
	return 0, 0, false
}

// addDays is the first instant of the day n calendar days after day's date.
func addDays(day time.Time, n int) time.Time {
	y, m, d := day.Date()
	return dayStart(y, m, d+n, day.Location())
}

// dayStart is the first instant of the civil date y-m-d (normalised like
// time.Date: December 32nd is January 1st) in loc. Where the clocks jump
// forward at midnight (America/Santiago, America/Havana) time.Date places
// the missing 00:00 on the day before; the day then starts when the jump
// ends. A day a zone skipped altogether starts at its successor's start.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if civil(t).Before(want) {
		if _, end := t.ZoneBounds(); !end.IsZero() {
			return end
		}
	}
	return t
}

// civil is t's local date as midnight UTC, for comparing calendar days.
func civil(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// validDate reports whether y-m-d is a real calendar date (no February 30th).
func validDate(y int, m time.Month, d int) bool {
	return d >= 1 && time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Day() == d
}

// startOfDay is the first instant of t's date in t's location.
func startOfDay(t time.Time) time.Time { return addDays(t, 0) }

// isoWeekday counts Monday as 0 and Sunday as 6.
func isoWeekday(w time.Weekday) int { return (int(w) + 6) % 7 }

// weekdayMode is how a weekday phrase is anchored.
type weekdayMode int

const (
	wdBare     weekdayMode = iota // "Friday": 1–7 days ahead
	wdThis                        // "this Friday": 0–6 days ahead
	wdNextWeek                    // "next Friday": the Friday of next week
)

func resolveWeekday(today time.Time, w time.Weekday, mode weekdayMode) time.Time {
	switch mode {
	case wdThis:
		return addDays(today, (int(w)-int(today.Weekday())+7)%7)
	case wdNextWeek:
		return addDays(today, 7-isoWeekday(today.Weekday())+isoWeekday(w))
	default:
		d := (int(w) - int(today.Weekday()) + 7) % 7
		if d == 0 {
			d = 7
		}
		return addDays(today, d)
	}
}

// dateFollowers may follow "the 3rd" when it is a date.
var dateFollowers = set("at", "between", "from", "by", "around", "in", "on", "and", "or", "then", "please",
	"instead", "morning", "afternoon", "evening", "eod", "cob", "end", "if", "when", "before", "after", "for",
	"is", "works", "would", "will", "should", "that", "which", "so", "but", "as", "to", "of", "about", "okay", "ok")

// parseDate reads the longest date phrase starting at toks[i].
func parseDate(toks []token, i int, ref time.Time) (dateMatch, bool) {
	today := startOfDay(ref)
	m, ok := parseDateCore(toks, i, today)
	if !ok {
		return m, false
	}
	m.start = i
	// Trailing part of the day or end-of-day words.
	if m.end < len(toks) {
		switch toks[m.end].low {
		case "morning":
			m.part, m.end = partAM, m.end+1
		case "afternoon", "evening", "night":
			m.part, m.end = partPM, m.end+1
		case "eod", "cob", "eob":
			m.end++
		case "end", "close":
			if n := endOfDayWords(toks, m.end); n > 0 {
				m.end += n
			}
		}
	}
	return m, true
}

// endOfDayWords matches "end of (the) day", "close of business", "end of
// business", "EOD", "COB" at toks[i] and returns their count.
func endOfDayWords(toks []token, i int) int {
	at := func(k int, words ...string) bool {
		for j, w := range words {
			if k+j >= len(toks) || toks[k+j].low != w {
				return false
			}
		}
		return true
	}
	switch {
	case at(i, "eod"), at(i, "cob"), at(i, "eob"):
		return 1
	case at(i, "end", "of", "the", "day"):
		return 4
	case at(i, "end", "of", "day"), at(i, "close", "of", "business"), at(i, "end", "of", "business"),
		at(i, "end", "of", "today"):
		return 3
	}
	return 0
}

func parseDateCore(toks []token, i int, today time.Time) (dateMatch, bool) {
	none := dateMatch{}
	if i >= len(toks) {
		return none, false
	}
	at := func(k int, words ...string) bool {
		for j, w := range words {
			if k+j >= len(toks) || toks[k+j].base() != w {
				return false
			}
		}
		return true
	}
	day := func(t time.Time, end int) (dateMatch, bool) { return dateMatch{day: t, end: end}, true }

	// End of day, optionally naming the day: "EOD tomorrow", "end of day on Friday".
	if n := endOfDayWords(toks, i); n > 0 {
		j := i + n
		if j < len(toks) && (toks[j].low == "on" || toks[j].low == "this") && j+1 < len(toks) {
			if m, ok := parseDateCore(toks, j+1, today); ok {
				return m, true
			}
			if toks[j].low == "on" {
				return day(today, j)
			}
		}
		if m, ok := parseDateCore(toks, j, today); ok {
			return m, true
		}
		return day(today, j)
	}
	w := toks[i].base()
	switch {
	case w == "today":
		return day(today, i+1)
	case w == "tonight":
		m, _ := day(today, i+1)
		m.part = partPM
		return m, true
	case w == "tomorrow" || w == "tmrw" || w == "tomorow":
		return day(addDays(today, 1), i+1)
	case at(i, "the", "day", "after", "tomorrow"):
		return day(addDays(today, 2), i+4)
	case at(i, "day", "after", "tomorrow"):
		return day(addDays(today, 2), i+3)
	case at(i, "this", "morning"):
		return dateMatch{day: today, end: i + 2, part: partAM}, true
	case at(i, "this", "afternoon"), at(i, "this", "evening"):
		return dateMatch{day: today, end: i + 2, part: partPM}, true
	case w == "eow" || at(i, "end", "of", "week"):
		n := 1
		if w != "eow" {
			n = 3
		}
		return day(resolveWeekday(today, time.Friday, wdThis), i+n)
	case at(i, "end", "of", "the", "week"), at(i, "end", "of", "this", "week"):
		return day(resolveWeekday(today, time.Friday, wdThis), i+4)
	case at(i, "end", "of", "next", "week"):
		return day(resolveWeekday(today, time.Friday, wdNextWeek), i+4)
	case w == "eom" || at(i, "end", "of", "the", "month") || at(i, "end", "of", "month"):
		n := 1
		switch {
		case at(i, "end", "of", "the", "month"):
			n = 4
		case w != "eom":
			n = 3
		}
		y, mo, _ := today.Date()
		return day(dayStart(y, mo+1, 0, today.Location()), i+n)
	case w == "in":
		if n, used, ok := countNumber(toks, i+1); ok && i+1+used < len(toks) {
			switch toks[i+1+used].low {
			case "day", "days":
				return day(addDays(today, n), i+2+used)
			case "week", "weeks":
				return day(addDays(today, 7*n), i+2+used)
			}
		}
		return none, false
	case w == "this" || w == "coming" || w == "upcoming" || w == "next":
		j, mode := i+1, wdBare
		switch {
		case w == "this" && at(j, "coming"):
			j++
		case w == "this":
			mode = wdThis
		case w == "next":
			mode = wdNextWeek
		}
		if j < len(toks) {
			if wd, ok := weekdays[toks[j].base()]; ok {
				return weekdayTail(toks, j+1, today, resolveWeekday(today, wd, mode))
			}
			if w == "next" && at(j, "week") && j+1 < len(toks) {
				if wd, ok := weekdays[toks[j+1].base()]; ok {
					return day(resolveWeekday(today, wd, wdNextWeek), j+2)
				}
			}
			if w == "this" && at(j, "week") && j+1 < len(toks) {
				if wd, ok := weekdays[toks[j+1].base()]; ok {
					return day(resolveWeekday(today, wd, wdThis), j+2)
				}
			}
		}
		return none, false
	}
	if wd, ok := weekdays[w]; ok {
		switch {
		case at(i+1, "next", "week"):
			return day(resolveWeekday(today, wd, wdNextWeek), i+3)
		case at(i+1, "of", "next", "week"):
			return day(resolveWeekday(today, wd, wdNextWeek), i+4)
		case at(i+1, "this", "week"):
			return day(resolveWeekday(today, wd, wdThis), i+3)
		case at(i+1, "after", "next"):
			return day(addDays(resolveWeekday(today, wd, wdNextWeek), 7), i+3)
		}
		return weekdayTail(toks, i+1, today, resolveWeekday(today, wd, wdBare))
	}
	if m, ok := parseMonthDay(toks, i, today); ok {
		return m, true
	}
	return parseNumericDate(toks, i, today)
}

// weekdayTail lets an explicit date after a weekday win: "Tuesday, December
// 1st", "Tuesday the 1st".
func weekdayTail(toks []token, j int, today, resolved time.Time) (dateMatch, bool) {
	k := j
	if k < len(toks) && toks[k].low == "," {
		k++
	}
	if m, ok := parseMonthDay(toks, k, today); ok {
		return m, true
	}
	if m, ok := parseNumericDate(toks, k, today); ok {
		return m, true
	}
	return dateMatch{day: resolved, end: j}, true
}

// parseMonthDay reads "December 3rd", "Dec. 3", "December the third",
// "3rd of December", "the 3rd of December", "3 December", "the 3rd",
// each with an optional year.
func parseMonthDay(toks []token, i int, today time.Time) (dateMatch, bool) {
	none := dateMatch{}
	if i >= len(toks) {
		return none, false
	}
	// Month first.
	if mo, ok := months[toks[i].low]; ok {
		j := i + 1
		if j < len(toks) && toks[j].low == "." {
			j++
		}
		if j < len(toks) && toks[j].low == "the" {
			j++
		}
		d, ordinal, n, ok := dayNumber(toks, j)
		if !ok {
			return none, false
		}
		j += n
		if mo == time.May && toks[i].low == "may" && !ordinal && j < len(toks) && toks[j].isWord() && !isYear(toks[j].low) {
			return none, false
		}
		return monthDayWithYear(toks, j, today, mo, d)
	}
	// Day first: "3rd of December", "the 3rd of December", "3 December", "the 3rd".
	j := i
	the := false
	if toks[j].low == "the" {
		the = true
		j++
	}
	d, ordinal, n, ok := dayNumber(toks, j)
	if !ok {
		return none, false
	}
	j += n
	k := j
	if k < len(toks) && toks[k].low == "of" {
		k++
	}
	if k < len(toks) {
		if mo, ok := months[toks[k].low]; ok && (k > j || ordinal || !the) {
			if mo == time.May && k == j && !ordinal {
				return none, false
			}
			return monthDayWithYear(toks, k+1, today, mo, d)
		}
	}
	if !the || !ordinal {
		return none, false
	}
	if j < len(toks) && toks[j].isWord() && !dateFollowers[toks[j].low] && !isDigits(toks[j].low) {
		if _, isNum := smallNumbers[toks[j].low]; !isNum {
			return none, false
		}
	}
	// "the 3rd": the next 3rd on or after today.
	y, mo, td := today.Date()
	for k := range 3 {
		first := time.Date(y, mo+time.Month(k), 1, 0, 0, 0, 0, time.UTC)
		if validDate(first.Year(), first.Month(), d) && (k > 0 || d >= td) {
			return dateMatch{day: dayStart(first.Year(), first.Month(), d, today.Location()), end: j}, true
		}
	}
	return none, false
}

func isYear(w string) bool {
	if !isDigits(w) || len(w) != 4 {
		return false
	}
	y, _ := strconv.Atoi(w)
	return y >= 2000 && y <= 2099
}

// monthDayWithYear finishes a month-day at toks[j]: an optional ", 2026";
// without a year, the next such day on or after today.
func monthDayWithYear(toks []token, j int, today time.Time, mo time.Month, d int) (dateMatch, bool) {
	k := j
	if k < len(toks) && toks[k].low == "," {
		k++
	}
	if k < len(toks) && isYear(toks[k].low) {
		y, _ := strconv.Atoi(toks[k].low)
		if !validDate(y, mo, d) {
			return dateMatch{}, false
		}
		return dateMatch{day: dayStart(y, mo, d, today.Location()), end: k + 1}, true
	}
	return nextMonthDay(today, mo, d, j)
}

// nextMonthDay is the first mo/d on or after today (looking up to eight
// years ahead, for February 29th).
func nextMonthDay(today time.Time, mo time.Month, d, end int) (dateMatch, bool) {
	y := today.Year()
	for k := range 9 {
		if validDate(y+k, mo, d) && !time.Date(y+k, mo, d, 0, 0, 0, 0, time.UTC).Before(civil(today)) {
			return dateMatch{day: dayStart(y+k, mo, d, today.Location()), end: end}, true
		}
	}
	return dateMatch{}, false
}

// parseNumericDate reads "12/3" (month/day, US order), "12/3/26",
// "12/3/2026" and "2026/12/3" (from "2026-12-03").
func parseNumericDate(toks []token, i int, today time.Time) (dateMatch, bool) {
	if i >= len(toks) {
		return dateMatch{}, false
	}
	parts := strings.Split(toks[i].low, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return dateMatch{}, false
	}
	nums := make([]int, len(parts))
	for k, p := range parts {
		if !isDigits(p) || len(p) > 4 {
			return dateMatch{}, false
		}
		nums[k], _ = strconv.Atoi(p)
	}
	var y, mo, d int
	switch {
	case len(parts) == 3 && len(parts[0]) == 4:
		y, mo, d = nums[0], nums[1], nums[2]
	case len(parts) == 3 && len(parts[2]) == 4:
		mo, d, y = nums[0], nums[1], nums[2]
	case len(parts) == 3 && len(parts[2]) == 2:
		mo, d, y = nums[0], nums[1], 2000+nums[2]
	case len(parts) == 2 && len(parts[0]) <= 2 && len(parts[1]) <= 2:
		mo, d = nums[0], nums[1]
	default:
		return dateMatch{}, false
	}
	if mo < 1 || mo > 12 || d < 1 || d > 31 {
		return dateMatch{}, false
	}
	if y == 0 {
		return nextMonthDay(today, time.Month(mo), d, i+1)
	}
	if y < 2000 || y > 2099 || !validDate(y, time.Month(mo), d) {
		return dateMatch{}, false
	}
	return dateMatch{day: dayStart(y, time.Month(mo), d, today.Location()), end: i + 1}, true
}

// findDates returns the non-overlapping date phrases of toks[from:to], left
// to right, each the longest at its start.
func findDates(toks []token, from, to int, ref time.Time) []dateMatch {
	var out []dateMatch
	sub := toks[:to]
	for i := from; i < to; {
		if m, ok := parseDate(sub, i, ref); ok && m.end > i {
			out = append(out, m)
			i = m.end
			continue
		}
		i++
	}
	return out
}
