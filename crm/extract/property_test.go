package extract_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/extract"
)

// propertyZones are the tenants' zones and a few awkward ones: half-hour
// offsets, a 30-minute DST shift, southern-hemisphere DST, and zones whose
// clocks change at midnight (so some days start at 01:00).
var propertyZones = []string{
	"America/Chicago", "America/Los_Angeles", "America/New_York", "UTC",
	"Asia/Kolkata", "Australia/Lord_Howe", "America/Santiago", "America/Havana", "Asia/Beirut",
}

var weekdayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// drawRef is a call start between 2000 and 2100 in one of propertyZones.
func drawRef(t *rapid.T) time.Time {
	zone := rapid.SampledFrom(propertyZones).Draw(t, "zone")
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatalf("loading %s: %v", zone, err)
	}
	lo := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	return time.Unix(rapid.Int64Range(lo, hi).Draw(t, "unix"), 0).In(loc)
}

// civilDays is the number of calendar days from a's date to b's date, each
// read in its own location.
func civilDays(a, b time.Time) int {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return int(time.Date(by, bm, bd, 0, 0, 0, 0, time.UTC).Sub(time.Date(ay, am, ad, 0, 0, 0, 0, time.UTC)).Hours() / 24)
}

// isoWeekStart is the Monday of d's week, as a civil date in UTC.
func isoWeekStart(d time.Time) time.Time {
	y, m, day := d.Date()
	return time.Date(y, m, day-(int(d.Weekday())+6)%7, 0, 0, 0, 0, time.UTC)
}

// noisy spells a phrase the way transcripts do: random case, a leading
// preposition, trailing punctuation.
func noisy(t *rapid.T, phrase string) string {
	switch rapid.IntRange(0, 2).Draw(t, "case") {
	case 1:
		phrase = strings.ToLower(phrase)
	case 2:
		phrase = strings.ToUpper(phrase)
	}
	return rapid.SampledFrom([]string{"", "on ", "by ", "By "}).Draw(t, "prefix") + phrase +
		rapid.SampledFrom([]string{"", ".", "!", ",", "?"}).Draw(t, "suffix")
}

// checkDay checks the invariants of every resolved date: in ref's
// location, the first instant of its day, not before the call's date.
func checkDay(t *rapid.T, phrase string, ref, got time.Time) int {
	if got.Location() != ref.Location() {
		t.Fatalf("%q: location %s, want %s", phrase, got.Location(), ref.Location())
	}
	if prev := got.Add(-time.Nanosecond); prev.Format(time.DateOnly) == got.Format(time.DateOnly) {
		t.Fatalf("%q: %s is not the first instant of its day", phrase, got.Format(time.RFC3339))
	}
	days := civilDays(ref, got)
	if days < 0 {
		t.Fatalf("%q at %s: %s is before the call's date", phrase, ref.Format(time.RFC3339), got.Format(time.DateOnly))
	}
	return days
}

func TestResolveDateWeekdayProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ref := drawRef(t)
		wd := time.Weekday(rapid.IntRange(0, 6).Draw(t, "weekday"))
		name := weekdayNames[wd]
		form := rapid.SampledFrom([]string{"%s", "coming %s", "this coming %s", "this %s", "%s this week",
			"next %s", "%s next week", "next week %s", "%s after next"}).Draw(t, "form")
		phrase := noisy(t, fmt.Sprintf(form, name))
		got, ok := extract.ResolveDate(phrase, ref)
		if !ok {
			t.Fatalf("%q: no date", phrase)
		}
		days := checkDay(t, phrase, ref, got)
		if got.Weekday() != wd {
			t.Fatalf("%q at %s: %s is a %s", phrase, ref.Format(time.RFC3339), got.Format(time.DateOnly), got.Weekday())
		}
		weeks := int(isoWeekStart(got).Sub(isoWeekStart(ref)).Hours() / 24 / 7)
		lo, hi, wantWeeks := 1, 7, -1
		switch form {
		case "this %s", "%s this week":
			lo, hi, wantWeeks = 0, 6, -1
		case "next %s", "%s next week", "next week %s":
			lo, hi, wantWeeks = 1, 13, 1
		case "%s after next":
			lo, hi, wantWeeks = 8, 20, 2
		}
		if days < lo || days > hi || wantWeeks >= 0 && weeks != wantWeeks {
			t.Fatalf("%q at %s (%s): %s is %d days and %d weeks ahead, want %d–%d days (weeks %d)",
				phrase, ref.Format(time.RFC3339), ref.Weekday(), got.Format(time.DateOnly), days, weeks, lo, hi, wantWeeks)
		}
	})
}

var monthNames = []string{"", "January", "February", "March", "April", "May", "June", "July", "August",
	"September", "October", "November", "December"}

func ordinal(d int) string {
	switch {
	case d%10 == 1 && d != 11:
		return fmt.Sprintf("%dst", d)
	case d%10 == 2 && d != 12:
		return fmt.Sprintf("%dnd", d)
	case d%10 == 3 && d != 13:
		return fmt.Sprintf("%drd", d)
	}
	return fmt.Sprintf("%dth", d)
}

func TestResolveDateMonthDayProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ref := drawRef(t)
		mo := rapid.IntRange(1, 12).Draw(t, "month")
		d := rapid.IntRange(1, time.Date(2001, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day()).Draw(t, "day")
		phrase := rapid.SampledFrom([]string{
			monthNames[mo] + " " + ordinal(d),
			monthNames[mo][:3] + " " + fmt.Sprint(d),
			ordinal(d) + " of " + monthNames[mo],
			fmt.Sprintf("%d/%d", mo, d),
		}).Draw(t, "phrase")
		if mo == 5 && phrase == "May "+fmt.Sprint(d) {
			phrase += "," // "May" needs an ordinal or a comma after the number
		}
		phrase = noisy(t, phrase)
		got, ok := extract.ResolveDate(phrase, ref)
		if !ok {
			t.Fatalf("%q: no date", phrase)
		}
		days := checkDay(t, phrase, ref, got)
		if int(got.Month()) != mo || got.Day() != d || days > 366 {
			t.Fatalf("%q at %s: %s, %d days ahead", phrase, ref.Format(time.RFC3339), got.Format(time.DateOnly), days)
		}
	})
}

func TestResolveDateNthProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ref := drawRef(t)
		d := rapid.IntRange(1, 31).Draw(t, "day")
		phrase := noisy(t, "the "+ordinal(d))
		got, ok := extract.ResolveDate(phrase, ref)
		if !ok {
			t.Fatalf("%q: no date", phrase)
		}
		days := checkDay(t, phrase, ref, got)
		if got.Day() != d || days > 62 {
			t.Fatalf("%q at %s: %s, %d days ahead", phrase, ref.Format(time.RFC3339), got.Format(time.DateOnly), days)
		}
		for k := range days { // no earlier day d on or after today
			y, m, day := ref.Date()
			if time.Date(y, m, day+k, 12, 0, 0, 0, time.UTC).Day() == d {
				t.Fatalf("%q at %s: %s skips an earlier %d", phrase, ref.Format(time.RFC3339), got.Format(time.DateOnly), d)
			}
		}
	})
}

func TestResolveDateRelativeProperty(t *testing.T) {
	t.Parallel()
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	rapid.Check(t, func(t *rapid.T) {
		ref := drawRef(t)
		n := rapid.IntRange(1, 12).Draw(t, "n")
		phrase, want := rapid.SampledFrom([]string{"today", "tomorrow", "day after tomorrow", "end of day", "EOD", "in days", "in words"}).Draw(t, "form"), 0
		switch phrase {
		case "tomorrow":
			want = 1
		case "day after tomorrow":
			want = 2
		case "in days":
			phrase, want = fmt.Sprintf("in %d days", n), n
		case "in words":
			phrase, want = fmt.Sprintf("in %s days", words[n]), n
		}
		phrase = noisy(t, phrase)
		got, ok := extract.ResolveDate(phrase, ref)
		if !ok {
			t.Fatalf("%q: no date", phrase)
		}
		if days := checkDay(t, phrase, ref, got); days != want {
			t.Fatalf("%q at %s: %s is %d days ahead, want %d", phrase, ref.Format(time.RFC3339), got.Format(time.DateOnly), days, want)
		}
	})
}

// TestExtractDatesProperty checks that the extractor dates actions exactly
// as ResolveDate does, in the tenant's zone.
func TestExtractDatesProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		ref := drawRef(t)
		started := ref.UTC() // the extractor must move it into Location itself
		phrase := rapid.SampledFrom([]string{"Friday", "next Wednesday", "this Monday", "tomorrow", "December 3rd", "the 15th", "end of day"}).Draw(t, "phrase")
		want, ok := extract.ResolveDate(phrase, ref)
		if !ok {
			t.Fatalf("%q: no date", phrase)
		}
		h := rapid.IntRange(6, 10).Draw(t, "hour") // no zone here changes its clocks between 6 and 11 am
		text := fmt.Sprintf("I'll send you the rate sheet for Chicago to Dallas by %s. Please move the pickup for PO 42 to %s between %d and %d am. Let's talk again %s.",
			phrase, phrase, h, h+1, phrase)
		actions, err := extract.RuleExtractor{}.Extract(context.Background(), crm.ExtractInput{CallID: "p", Text: text, StartedAt: started, Location: ref.Location()})
		if err != nil {
			t.Fatal(err)
		}
		if len(actions) != 4 {
			t.Fatalf("%q: %d actions %+v", text, len(actions), actions)
		}
		date := want.Format(time.DateOnly)
		if actions[1].Due != date || actions[3].Date != date {
			t.Fatalf("%q at %s: due %s, next call %s, want %s", text, ref.Format(time.RFC3339), actions[1].Due, actions[3].Date, date)
		}
		w := actions[2].Window
		if w == nil || w.Start.Location() != ref.Location() || !w.Start.Before(w.End) {
			t.Fatalf("%q: window %+v", text, w)
		}
		if d := w.Start.Format(time.DateOnly); d != date || w.Start.Hour() != h || w.End.Sub(w.Start) != time.Hour {
			t.Fatalf("%q at %s: window starts %s, want on %s", text, ref.Format(time.RFC3339), w.Start.Format(time.RFC3339), date)
		}
	})
}

var dateOnly = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// checkActions checks the invariants of every extraction.
func checkActions(t testing.TB, text string, actions []crm.Action) {
	t.Helper()
	if len(actions) == 0 || actions[0].Kind != crm.KindCallNote || actions[0].Text == "" {
		t.Fatalf("%q: first action %+v, want a non-empty call_note", text, actions)
	}
	validDate := func(s string) bool {
		if !dateOnly.MatchString(s) {
			return false
		}
		_, err := time.Parse(time.DateOnly, s)
		return err == nil
	}
	for i, a := range actions[1:] {
		switch a.Kind {
		case crm.KindCallNote:
			t.Fatalf("%q: a second call_note at %d", text, i+1)
		case crm.KindRateSheetPromised:
			if a.Due != "" && !validDate(a.Due) {
				t.Fatalf("%q: due %q", text, a.Due)
			}
			for _, l := range a.Lanes {
				if o, d, ok := strings.Cut(l, " to "); !ok || o == "" || d == "" {
					t.Fatalf("%q: lane %q", text, l)
				}
			}
		case crm.KindPickupWindowChange:
			if a.ShipmentRef == "" || a.Window == nil || !a.Window.Start.Before(a.Window.End) {
				t.Fatalf("%q: pickup %+v", text, a)
			}
		case crm.KindNextCall:
			if !validDate(a.Date) {
				t.Fatalf("%q: next call date %q", text, a.Date)
			}
		default:
			t.Fatalf("%q: kind %q", text, a.Kind)
		}
	}
	if _, err := json.Marshal(actions); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		"Thanks for the call. I'll send you the rate sheet for Chicago to Dallas and Memphis to Atlanta by Friday.",
		"Please move the pickup for shipment PO 4471 to Tuesday between 8 and 10 am.",
		"Good talking today. Let's talk again next Wednesday about the Milwaukee volume.",
		"I'll send you the rate sheet for Atlanta to Charlotte by Monday, and let's talk again next Thursday.",
		"can we push the pick up on P.O. #4471 to Monday 1 to 3 PM",
		"Reschedule pickup for BOL 12345 to December 3rd at 9",
		"Move the pickup for PO 4471 to Tuesday between 8 and 10 and PO 4472 to Wednesday at 7",
		"We need to move the pickup for PO 4471. Can you do Tuesday morning, 8 to 10?",
		"i'll send over rates for salt lake city to new york by the 31st eod",
		"Move the pickup for PO 1 to Sunday from 2 to 3 am.",
		"move pickup load 9 to 2026-02-29 between twelve and twelve pm",
		"", "…", "a.m. p.m. P.O. 12/3/99 the 3rd of may 10:99 25:00",
	} {
		f.Add(s, int64(1795446760), uint8(0))
	}
	f.Fuzz(func(t *testing.T, text string, unix int64, zone uint8) {
		lo := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		span := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - lo
		unix = lo + (unix%span+span)%span
		loc := mustZone(t, propertyZones[int(zone)%len(propertyZones)])
		actions, err := extract.RuleExtractor{MaxNoteRunes: 80}.Extract(context.Background(), crm.ExtractInput{
			CallID: "f", Text: text, StartedAt: time.Unix(unix, 0), Location: loc,
		})
		if err != nil {
			t.Fatal(err)
		}
		checkActions(t, text, actions)
		for _, a := range actions {
			if a.Window != nil && (a.Window.Start.Location() != loc || a.Window.End.Location() != loc) {
				t.Fatalf("%q: window not in %s: %+v", text, loc, a.Window)
			}
		}
	})
}
