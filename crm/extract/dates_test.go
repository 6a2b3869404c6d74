package extract_test

import (
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm/extract"
)

func TestResolveDate(t *testing.T) {
	t.Parallel()
	chicago := mustZone(t, "America/Chicago")
	at := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, chicago) }
	var (
		mon = at(2026, 11, 23, 9)  // Monday
		tue = at(2026, 11, 24, 14) // Tuesday
		fri = at(2026, 11, 27, 10) // Friday
		sat = at(2026, 11, 28, 10) // Saturday
		sun = at(2026, 11, 29, 16) // Sunday
		nye = at(2026, 12, 31, 15) // Thursday, last day of the year
		// US DST ends Sunday 2026-11-01 and starts Sunday 2026-03-08.
		beforeFallBack      = at(2026, 10, 31, 12) // Saturday
		beforeSpringForward = at(2026, 3, 7, 23)   // Saturday
	)
	tests := []struct {
		ref    time.Time
		phrase string
		want   string // YYYY-MM-DD, "" for no date
	}{
		// Bare weekdays: the next one strictly after today, 1–7 days.
		{fri, "Friday", "2026-12-04"},
		{fri, "by Friday", "2026-12-04"},
		{fri, "Saturday", "2026-11-28"},
		{fri, "Monday", "2026-11-30"},
		{mon, "Monday", "2026-11-30"},
		{mon, "Friday", "2026-11-27"},
		{sun, "Sunday", "2026-12-06"},
		{sun, "Monday", "2026-11-30"},
		{tue, "coming Wednesday", "2026-11-25"},
		{fri, "this coming Friday", "2026-12-04"},
		{tue, "on Tuesday's", "2026-12-01"},
		// "this": the coming one or today, 0–6 days.
		{fri, "this Friday", "2026-11-27"},
		{tue, "this Wednesday", "2026-11-25"},
		{tue, "this Monday", "2026-11-30"},
		{sun, "this Sunday", "2026-11-29"},
		{mon, "Thursday this week", "2026-11-26"},
		// "next": that weekday of next week, weeks Monday to Sunday.
		{tue, "next Wednesday", "2026-12-02"},
		{tue, "next Tuesday", "2026-12-01"},
		{tue, "next Monday", "2026-11-30"},
		{mon, "next Monday", "2026-11-30"},
		{mon, "next Sunday", "2026-12-06"},
		{fri, "next Friday", "2026-12-04"},
		{fri, "next Monday", "2026-11-30"},
		{sat, "next Monday", "2026-11-30"},
		{sun, "next Monday", "2026-11-30"},
		{sun, "next Sunday", "2026-12-06"},
		{sun, "next Saturday", "2026-12-05"},
		{tue, "Wednesday next week", "2026-12-02"},
		{tue, "next week Wednesday", "2026-12-02"},
		{tue, "Wednesday of next week", "2026-12-02"},
		{fri, "Friday after next", "2026-12-11"},
		{tue, "NEXT WEDNESDAY.", "2026-12-02"},
		// Relative days.
		{fri, "today", "2026-11-27"},
		{fri, "tonight", "2026-11-27"},
		{fri, "tomorrow", "2026-11-28"},
		{fri, "tomorrow morning", "2026-11-28"},
		{fri, "the day after tomorrow", "2026-11-29"},
		{mon, "in two days", "2026-11-25"},
		{mon, "in 10 days", "2026-12-03"},
		{mon, "in a week", "2026-11-30"},
		{mon, "in 2 weeks", "2026-12-07"},
		{mon, "in a couple of days", "2026-11-25"},
		// End of day, week, month.
		{mon, "end of day", "2026-11-23"},
		{mon, "by end of the day", "2026-11-23"},
		{mon, "EOD", "2026-11-23"},
		{mon, "COB", "2026-11-23"},
		{mon, "close of business Friday", "2026-11-27"},
		{mon, "EOD tomorrow", "2026-11-24"},
		{mon, "end of day on Friday", "2026-11-27"},
		{mon, "Friday EOD", "2026-11-27"},
		{mon, "end of the week", "2026-11-27"},
		{fri, "end of the week", "2026-11-27"},
		{sat, "end of the week", "2026-12-04"},
		{mon, "end of next week", "2026-12-04"},
		{mon, "end of the month", "2026-11-30"},
		// Month and day: on or after today, this year or next.
		{mon, "December 3rd", "2026-12-03"},
		{mon, "Dec. 3", "2026-12-03"},
		{mon, "dec 3", "2026-12-03"},
		{mon, "December the third", "2026-12-03"},
		{mon, "3rd of December", "2026-12-03"},
		{mon, "the 3rd of December", "2026-12-03"},
		{mon, "3 December", "2026-12-03"},
		{mon, "December twenty-first", "2026-12-21"},
		{mon, "December twenty first", "2026-12-21"},
		{mon, "December thirty one", "2026-12-31"},
		{mon, "November 23rd", "2026-11-23"},
		{mon, "November 20th", "2027-11-20"},
		{mon, "February 29th", "2028-02-29"},
		{mon, "May 3rd", "2027-05-03"},
		{mon, "May 3", "2027-05-03"},
		{mon, "December 3rd, 2027", "2027-12-03"},
		{mon, "Tuesday, December 1st", "2026-12-01"},
		{mon, "12/3", "2026-12-03"},
		{mon, "12/3/27", "2027-12-03"},
		{mon, "12/03/2026", "2026-12-03"},
		{mon, "2026-12-03", "2026-12-03"},
		// "the Nth": the next such day on or after today.
		{mon, "the 3rd", "2026-12-03"},
		{mon, "on the third", "2026-12-03"},
		{mon, "the 23rd", "2026-11-23"},
		{mon, "the 22nd", "2026-12-22"},
		{mon, "the 31st", "2026-12-31"},
		// Year rollover.
		{nye, "tomorrow", "2027-01-01"},
		{nye, "Friday", "2027-01-01"},
		{nye, "next Friday", "2027-01-08"},
		{nye, "day after tomorrow", "2027-01-02"},
		{nye, "January 2nd", "2027-01-02"},
		{nye, "December 3rd", "2027-12-03"},
		{nye, "the 1st", "2027-01-01"},
		{nye, "in 3 days", "2027-01-03"},
		{nye, "12/31", "2026-12-31"},
		{nye, "end of the month", "2026-12-31"},
		// DST: dates are calendar days, whatever the offset.
		{beforeFallBack, "tomorrow", "2026-11-01"},
		{beforeFallBack, "Monday", "2026-11-02"},
		{beforeFallBack, "in 2 days", "2026-11-02"},
		{beforeSpringForward, "tomorrow", "2026-03-08"},
		{beforeSpringForward, "Monday", "2026-03-09"},
		{beforeSpringForward, "next Sunday", "2026-03-15"},
		// Not a date phrase.
		{mon, "", ""},
		{mon, "sometime next week", ""},
		{mon, "next week", ""},
		{mon, "next", ""},
		{mon, "the third load", ""},
		{mon, "Mon", ""},
		{mon, "February 30th", ""},
		{mon, "13/45", ""},
		{mon, "Friday at noon", ""}, // a time is not part of a date phrase
	}
	for _, tt := range tests {
		got, ok := extract.ResolveDate(tt.phrase, tt.ref)
		if tt.want == "" {
			if ok {
				t.Errorf("%s %q: %s, want no date", tt.ref.Format("Mon 2006-01-02"), tt.phrase, got.Format(time.RFC3339))
			}
			continue
		}
		if !ok {
			t.Errorf("%s %q: no date, want %s", tt.ref.Format("Mon 2006-01-02"), tt.phrase, tt.want)
			continue
		}
		if got.Format(time.DateOnly) != tt.want || got.Location() != chicago || got.Hour() != 0 || got.Minute() != 0 {
			t.Errorf("%s %q: %s, want %s at midnight in %s", tt.ref.Format("Mon 2006-01-02"), tt.phrase, got.Format(time.RFC3339), tt.want, chicago)
		}
	}
}

// TestResolveDateLocalDay checks that "today" is the tenant's day, not UTC's.
func TestResolveDateLocalDay(t *testing.T) {
	t.Parallel()
	chicago := mustZone(t, "America/Chicago")
	utc := time.Date(2026, 11, 30, 4, 30, 0, 0, time.UTC) // Monday in UTC, Sunday 22:30 in Chicago
	for phrase, want := range map[string]string{"today": "2026-11-29", "tomorrow": "2026-11-30", "Monday": "2026-11-30", "next Monday": "2026-11-30"} {
		got, ok := extract.ResolveDate(phrase, utc.In(chicago))
		if !ok || got.Format(time.DateOnly) != want {
			t.Errorf("%q: %s %v, want %s", phrase, got.Format(time.DateOnly), ok, want)
		}
	}
	got, _ := extract.ResolveDate("today", utc)
	if got.Format(time.DateOnly) != "2026-11-30" {
		t.Errorf("today at %s in UTC: %s", utc, got.Format(time.DateOnly))
	}
}
