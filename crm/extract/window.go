package extract

import (
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// meridiem is what a spoken time says of its half of the day.
type meridiem int

const (
	merNone meridiem = iota
	merAM
	merPM
	mer24 // a 24-hour time ("14:00", "08:30"): needs no inference
)

// clockTime is one spoken time of day.
type clockTime struct {
	h, min int
	mer    meridiem
	colon  bool // written "8:30": a time, not a bare number
}

// timeRange is a spoken time or time range at toks[start:end].
type timeRange struct {
	start, end int
	from, to   clockTime
	single     bool // "at 9": WindowDefaultLength from the start
}

var minuteWords = map[string]int{"fifteen": 15, "thirty": 30, "forty-five": 45, "o'clock": 0}

// parseClock reads a time of day at toks[i]: "8", "8:30", "08:00", "14:00",
// "eight", "eight thirty", "nine o'clock", "noon", each with an optional
// "am"/"pm" (the tokenizer has made "a.m." and "8am" into these), "in the
// morning", "in the afternoon", "in the evening" or "at night".
func parseClock(toks []token, i int) (clockTime, int, bool) {
	if i >= len(toks) {
		return clockTime{}, 0, false
	}
	w := toks[i].low
	var c clockTime
	j := i + 1
	switch {
	case w == "noon" || w == "midday":
		return clockTime{h: 12, mer: merPM}, 1, true
	case isDigits(strings.ReplaceAll(w, ":", "")) && strings.Count(w, ":") <= 1:
		hs, ms, colon := strings.Cut(w, ":")
		if len(hs) == 0 || len(hs) > 2 || colon && len(ms) != 2 {
			return clockTime{}, 0, false
		}
		c.h, _ = strconv.Atoi(hs)
		if colon {
			c.min, _ = strconv.Atoi(ms)
			c.colon = true
		}
		if c.h > 23 || c.min > 59 {
			return clockTime{}, 0, false
		}
		if c.h >= 13 || c.h == 0 || colon && hs[0] == '0' {
			c.mer = mer24
		}
	default:
		h, ok := smallNumbers[w]
		if !ok {
			return clockTime{}, 0, false
		}
		c.h = h
		if j < len(toks) {
			next := toks[j].low
			if m, ok := minuteWords[next]; ok {
				c.min = m
				j++
			} else if next == "forty" && j+1 < len(toks) && toks[j+1].low == "five" {
				c.min = 45
				j += 2
			}
		}
	}
	if j < len(toks) && toks[j].low == "o'clock" {
		j++
	}
	at := func(k int, words ...string) bool {
		for n, w := range words {
			if k+n >= len(toks) || toks[k+n].low != w {
				return false
			}
		}
		return true
	}
	mer := merNone
	switch {
	case at(j, "am"):
		mer, j = merAM, j+1
	case at(j, "pm"):
		mer, j = merPM, j+1
	case at(j, "in", "the", "morning"):
		mer, j = merAM, j+3
	case at(j, "in", "the", "afternoon"), at(j, "in", "the", "evening"):
		mer, j = merPM, j+3
	case at(j, "at", "night"):
		mer, j = merPM, j+2
	}
	if mer != merNone {
		if c.mer == mer24 && c.h != 0 && c.h < 13 { // "08:30 am"
			c.mer = merNone
		}
		if c.mer == mer24 || c.h < 1 || c.h > 12 {
			return clockTime{}, 0, false
		}
		c.mer = mer
	}
	return c, j - i, true
}

var rangeSeparators = set("to", "till", "til", "until", "through", "thru", "-")

// parseTimeRange reads a time or a time range at toks[i]: "between 8 and 10
// am", "from 7 to 9", "1 to 3 pm", "1-3pm", "at 9", "around nine thirty",
// "9 am", "noon", "14:00".
func parseTimeRange(toks []token, i int) (timeRange, bool) {
	if i >= len(toks) {
		return timeRange{}, false
	}
	pair := func(k int, sep func(string) bool) (timeRange, bool) {
		a, n, ok := parseClock(toks, k)
		if !ok || k+n >= len(toks) || !sep(toks[k+n].low) {
			return timeRange{}, false
		}
		b, m, ok := parseClock(toks, k+n+1)
		if !ok {
			return timeRange{}, false
		}
		return timeRange{start: i, end: k + n + 1 + m, from: a, to: b}, true
	}
	switch toks[i].low {
	case "between":
		return pair(i+1, func(s string) bool { return s == "and" || rangeSeparators[s] })
	case "from":
		return pair(i+1, func(s string) bool { return rangeSeparators[s] })
	case "at", "around", "about":
		if r, ok := pair(i+1, func(s string) bool { return rangeSeparators[s] }); ok {
			return r, true
		}
		if c, n, ok := parseClock(toks, i+1); ok {
			return timeRange{start: i, end: i + 1 + n, from: c, single: true}, true
		}
		return timeRange{}, false
	}
	if r, ok := pair(i, func(s string) bool { return rangeSeparators[s] }); ok {
		return r, true
	}
	// A lone time counts only when it cannot be a plain number.
	if c, n, ok := parseClock(toks, i); ok && (c.mer != merNone || c.colon) {
		return timeRange{start: i, end: i + n, from: c, single: true}, true
	}
	return timeRange{}, false
}

func to24(h int, m meridiem) int {
	switch m {
	case merAM:
		return h % 12
	case merPM:
		return h%12 + 12
	default:
		return h
	}
}

func other(m meridiem) meridiem {
	if m == merAM {
		return merPM
	}
	return merAM
}

// businessHalf is the half of the day of an hour said without am/pm: 6–11
// are morning, 12 is noon, 1–5 are afternoon (freight pickups start early and
// end by evening).
func businessHalf(h int) meridiem {
	if h >= 6 && h <= 11 {
		return merAM
	}
	return merPM
}

// minutesOfDay resolves a time range to minutes after midnight. The am/pm
// rules:
//
//   - Said on both ends (or 24-hour times): as said.
//   - Said only at the end ("8 and 10 am", "1 to 3 pm"): the start takes the
//     end's half unless that puts it at or after the end, then the other
//     half ("11 to 1 pm" is 11 am to 1 pm, "10 to 12 pm" 10 am to noon).
//   - Said only at the start ("10 am to 2"): the end takes the start's half
//     unless that puts it at or before the start ("10 am to 2" is 10 am to
//     2 pm).
//   - Said nowhere: the date's part of the day ("Tuesday morning 8 to 10",
//     "tomorrow afternoon 1 to 3") sets the start's half; without one, 6–11
//     are am and 12 and 1–5 pm; the end is then the first of its am/pm
//     readings after the start ("8 to 10" is 8–10 am, "1 to 3" 1–3 pm, "11
//     to 1" 11 am–1 pm).
//
// A range that still ends at or before its start (it would cross midnight)
// is refused. A single time ends WindowDefaultLength after its start.
func minutesOfDay(r timeRange, part partOfDay) (start, end int, ok bool) {
	a, b := r.from, r.to
	if a.mer == merNone && part != partNone {
		a.mer = merAM
		if part == partPM {
			a.mer = merPM
		}
	}
	if r.single {
		if a.mer == merNone {
			a.mer = businessHalf(a.h)
		}
		s := to24(a.h, a.mer)*60 + a.min
		return s, s + int(WindowDefaultLength/time.Minute), true
	}
	var s, e int
	switch {
	case a.mer != merNone && b.mer != merNone:
		s, e = to24(a.h, a.mer)*60+a.min, to24(b.h, b.mer)*60+b.min
	case b.mer != merNone:
		e = to24(b.h, b.mer)*60 + b.min
		s = to24(a.h, b.mer)*60 + a.min
		if s >= e && b.mer != mer24 {
			s = to24(a.h, other(b.mer))*60 + a.min
		}
	default:
		if a.mer == merNone {
			a.mer = businessHalf(a.h)
		}
		s = to24(a.h, a.mer)*60 + a.min
		if a.mer == mer24 {
			e = to24(b.h, businessHalf(b.h))*60 + b.min
		} else {
			e = to24(b.h, a.mer)*60 + b.min
		}
		if e <= s {
			e = to24(b.h, merAM)*60 + b.min
			if e <= s {
				e = to24(b.h, merPM)*60 + b.min
			}
		}
	}
	if e <= s {
		return 0, 0, false
	}
	return s, e, true
}

// window places a time range on a day in the day's location. On a DST
// change a repeated wall time is its first occurrence (time.Date's choice)
// and a wall time in the spring-forward gap is the instant the gap ends:
// "between 1 and 2 am" on 2026-03-08 in Chicago is 01:00 CST to 03:00 CDT,
// one hour, and "from 2 to 3 am" is empty and refused.
func window(day time.Time, r timeRange, part partOfDay) (*crm.Window, bool) {
	s, e, ok := minutesOfDay(r, part)
	if !ok {
		return nil, false
	}
	start := wallTime(day, s)
	var end time.Time
	if r.single {
		end = start.Add(WindowDefaultLength)
	} else {
		end = wallTime(day, e)
	}
	if !start.Before(end) {
		return nil, false
	}
	return &crm.Window{Start: start, End: end}, true
}

// wallTime is the instant the clock reads minutes past midnight on day's
// date, in day's location; see window for DST.
func wallTime(day time.Time, minutes int) time.Time {
	y, m, d := day.Date()
	h, mi := minutes/60, minutes%60
	t := time.Date(y, m, d, h, mi, 0, 0, day.Location())
	if t.Hour() != h || t.Minute() != mi || t.Day() != d {
		// In a gap: time.Date went back to before the jump; take its end.
		if _, end := t.ZoneBounds(); !end.IsZero() && end.After(t) {
			t = end
		}
	}
	if t.Before(day) {
		t = day
	}
	return t
}

// wholeDay is the window of a pickup day said without a time: the day's
// first instant to the next day's.
func wholeDay(day time.Time) *crm.Window {
	return &crm.Window{Start: day, End: addDays(day, 1)}
}
