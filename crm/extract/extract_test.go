package extract_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests need IANA zones even where the system has none

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/extract"
)

// tenantZones are the recordings' tenants' time zones.
var tenantZones = map[string]string{
	"northline": "America/Chicago",
	"harbor":    "America/Los_Angeles",
	"ridgeway":  "America/New_York",
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("loading zone %s: %v", name, err)
	}
	return loc
}

// readJSONL decodes one value per line of a file under testdata/recordings.
func readJSONL[T any](t *testing.T, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "recordings", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var v T
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExtractRecordings runs the extractor over every recording of the
// manifest and compares with testdata/recordings/actions.jsonl: the
// call_note by prefix (and its excerpt against expected_text), every other
// action exactly, as JSON.
func TestExtractRecordings(t *testing.T) {
	t.Parallel()
	type manifestLine struct {
		TenantID     string    `json:"tenant_id"`
		CallID       string    `json:"call_id"`
		StartedAt    time.Time `json:"started_at"`
		ExpectedText string    `json:"expected_text"`
	}
	type actionsLine struct {
		TenantID string       `json:"tenant_id"`
		CallID   string       `json:"call_id"`
		Actions  []crm.Action `json:"actions"`
	}
	manifest := readJSONL[manifestLine](t, "manifest.jsonl")
	want := readJSONL[actionsLine](t, "actions.jsonl")
	if len(manifest) != len(want) || len(manifest) == 0 {
		t.Fatalf("manifest.jsonl has %d lines, actions.jsonl %d: want one expectation per recording", len(manifest), len(want))
	}
	for i, m := range manifest {
		w := want[i]
		t.Run(m.TenantID+"/"+m.CallID, func(t *testing.T) {
			if w.TenantID != m.TenantID || w.CallID != m.CallID {
				t.Fatalf("actions.jsonl line %d is %s/%s, want %s/%s", i+1, w.TenantID, w.CallID, m.TenantID, m.CallID)
			}
			loc := mustZone(t, tenantZones[m.TenantID])
			_, manifestOffset := m.StartedAt.Zone()
			if _, zoneOffset := m.StartedAt.In(loc).Zone(); zoneOffset != manifestOffset {
				t.Fatalf("started_at %s has offset %d, but %s is at %d then", m.StartedAt.Format(time.RFC3339), manifestOffset, loc, zoneOffset)
			}
			got, err := extract.RuleExtractor{}.Extract(context.Background(), crm.ExtractInput{
				TenantID: m.TenantID, CallID: m.CallID, Text: m.ExpectedText, StartedAt: m.StartedAt, Location: loc,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(w.Actions) {
				t.Fatalf("got %d actions %s, want %d %s", len(got), mustJSON(t, got), len(w.Actions), mustJSON(t, w.Actions))
			}
			note, wantNote := got[0], w.Actions[0]
			if note.Kind != crm.KindCallNote || wantNote.Kind != crm.KindCallNote {
				t.Fatalf("first actions are %s and %s, want call_note", note.Kind, wantNote.Kind)
			}
			if !strings.HasPrefix(note.Text, wantNote.Text) {
				t.Errorf("call_note %q, want prefix %q", note.Text, wantNote.Text)
			}
			if !strings.HasSuffix(note.Text, "\n\n"+m.ExpectedText) {
				t.Errorf("call_note %q does not end with the transcript", note.Text)
			}
			if g, w := mustJSON(t, got[1:]), mustJSON(t, w.Actions[1:]); g != w {
				t.Errorf("actions\n got %s\nwant %s", g, w)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// describe renders the actions after the call_note compactly for tables:
// "rate Chicago to Dallas|Memphis to Atlanta due 2026-11-27",
// "pickup PO-4471 2026-11-24T08:00:00-06:00/10:00", "next 2026-12-02".
func describe(actions []crm.Action) []string {
	var out []string
	for _, a := range actions[1:] {
		switch a.Kind {
		case crm.KindRateSheetPromised:
			out = append(out, fmt.Sprintf("rate %s due %s", strings.Join(a.Lanes, "|"), a.Due))
		case crm.KindPickupWindowChange:
			end := a.Window.End.Format(time.RFC3339)
			if a.Window.Start.Format(time.DateOnly) == a.Window.End.Format(time.DateOnly) {
				end = a.Window.End.Format("15:04")
			}
			out = append(out, fmt.Sprintf("pickup %s %s/%s", a.ShipmentRef, a.Window.Start.Format(time.RFC3339), end))
		case crm.KindNextCall:
			out = append(out, "next "+a.Date)
		default:
			out = append(out, "unexpected "+string(a.Kind))
		}
	}
	return out
}

func TestExtractPhrasings(t *testing.T) {
	t.Parallel()
	chicago := mustZone(t, "America/Chicago")
	monday := time.Date(2026, 11, 23, 9, 12, 40, 0, chicago) // Monday 2026-11-23
	tests := []struct {
		name string
		text string
		want []string
	}{
		// rate_sheet_promised
		{"lower case, send over", "ill be honest. i'll send over rates for chicago to dallas by friday",
			[]string{"rate Chicago to Dallas due 2026-11-27"}},
		{"upper case, multi-word cities, month day", "I'LL SEND YOU THE RATE SHEET FOR SALT LAKE CITY TO NEW YORK BY DECEMBER 3RD",
			[]string{"rate Salt Lake City to New York due 2026-12-03"}},
		{"three lanes, commas and 'and', end of day", "We'll email pricing for Salt Lake City to New York, Los Angeles to San Francisco and St. Louis to Fort Worth by end of day.",
			[]string{"rate Salt Lake City to New York|Los Angeles to San Francisco|St. Louis to Fort Worth due 2026-11-23"}},
		{"get you a quote, by tomorrow", "I can get you a quote on Chicago to Dallas by tomorrow.",
			[]string{"rate Chicago to Dallas due 2026-11-24"}},
		{"quote as a verb, the 1st", "Let me quote you Reno to Boise by the 1st",
			[]string{"rate Reno to Boise due 2026-12-01"}},
		{"number words", "I'll send the quote for Chicago to Dallas in two days.",
			[]string{"rate Chicago to Dallas due 2026-11-25"}},
		{"no problem is no negation", "No problem I'll send you the rates by Friday",
			[]string{"rate  due 2026-11-27"}},
		{"lanes from an earlier sentence", "The lanes are Chicago to Dallas and Dallas to Houston. I'll send the rate sheet by Friday.",
			[]string{"rate Chicago to Dallas|Dallas to Houston due 2026-11-27"}},
		{"repeat lanes once", "I'll send rates for Chicago to Dallas and chicago to dallas by Friday",
			[]string{"rate Chicago to Dallas due 2026-11-27"}},
		{"speaker labels and filler, lower case", "ok so um yeah we'll email you the pricing for los angeles to phoenix and phoenix to el paso by next tuesday thanks",
			[]string{"rate Los Angeles to Phoenix|Phoenix to El Paso due 2026-12-01"}},
		{"St. and Dec.", "I'll send the rate sheet for St. Louis to Kansas City by Dec. 3.",
			[]string{"rate St. Louis to Kansas City due 2026-12-03"}},
		{"have ... to you by the end of the week", "I'll have the rates to you by the end of the week",
			[]string{"rate  due 2026-11-27"}},
		{"weekday with its date", "I'll send the rate sheet over by Wednesday the 25th",
			[]string{"rate  due 2026-11-25"}},
		{"negated", "I can't send the rate sheet for Chicago to Dallas.", nil},
		{"won't be able to", "I won't be able to send the rate sheet.", nil},
		{"a rate stated, not promised", "The rate for Chicago to Dallas is $2.10 a mile.", nil},
		{"negated further back", "I don't think we can send rates for Chicago to Dallas by Friday", nil},
		{"past tense", "I already sent you the rate sheet for Chicago to Dallas.", nil},
		{"rates without a delivery", "Rates will go up next month.", nil},

		// pickup_window_change
		{"lower case, a.m., number words", "please move the pickup for PO-4471 to tuesday between eight and ten a.m.",
			[]string{"pickup PO-4471 2026-11-24T08:00:00-06:00/10:00"}},
		{"P.O. #, PM, no comma", "can we push the pick up on P.O. #4471 to Monday 1 to 3 PM",
			[]string{"pickup PO-4471 2026-11-30T13:00:00-06:00/15:00"}},
		{"month day at 9 is one hour", "Reschedule pickup for BOL 12345 to December 3rd at 9",
			[]string{"pickup BOL-12345 2026-12-03T09:00:00-06:00/10:00"}},
		{"11 to 1 pm", "The pickup for load 778 moved to tomorrow from 11 to 1 pm.",
			[]string{"pickup LOAD-778 2026-11-24T11:00:00-06:00/13:00"}},
		{"no am or pm at all", "Change the pickup on shipment 5820 to Friday 11 to 1",
			[]string{"pickup SHIPMENT-5820 2026-11-27T11:00:00-06:00/13:00"}},
		{"glued reference and times", "We need to move the pickup for PO4471 to Wednesday 10am-2pm",
			[]string{"pickup PO-4471 2026-11-25T10:00:00-06:00/14:00"}},
		{"from 7 to 9 am with minutes", "Please move the pickup for PO 4471 to Thursday from 7:30 to 9 a.m. Thanks!",
			[]string{"pickup PO-4471 2026-11-26T07:30:00-06:00/09:00"}},
		{"afternoon sets the half", "Move the pickup for PO 4471 to tomorrow afternoon, 2 to 4",
			[]string{"pickup PO-4471 2026-11-24T14:00:00-06:00/16:00"}},
		{"ampersand", "Please move the pickup for PO 4471 to Tuesday between 8 & 10am",
			[]string{"pickup PO-4471 2026-11-24T08:00:00-06:00/10:00"}},
		{"number words with minutes", "Please move the pickup for PO 4471 to Tuesday at eight thirty",
			[]string{"pickup PO-4471 2026-11-24T08:30:00-06:00/09:30"}},
		{"weekday and date, a.m. twice", "Please move the pickup for PO 4471 to Thursday the 26th from 7 a.m. to 9 a.m. OK?",
			[]string{"pickup PO-4471 2026-11-26T07:00:00-06:00/09:00"}},
		{"bill of lading, in the morning", "reschedule the pickup on bill of lading 12345 to friday between 9 and 11 in the morning",
			[]string{"pickup BOL-12345 2026-11-27T09:00:00-06:00/11:00"}},
		{"reference in the sentence after", "Could we do the pickup Tuesday instead, say 1 to 3 pm? It's for load 778.",
			[]string{"pickup LOAD-778 2026-11-24T13:00:00-06:00/15:00"}},
		{"a day without a time is the whole day", "Move the pickup for PO 4471 to Tuesday",
			[]string{"pickup PO-4471 2026-11-24T00:00:00-06:00/2026-11-25T00:00:00-06:00"}},
		{"from one day to another", "Move the pickup for PO 4471 from Monday to Wednesday at 8",
			[]string{"pickup PO-4471 2026-11-25T08:00:00-06:00/09:00"}},
		{"a time without a day", "Move the pickup for PO 4471 to 3 pm", nil},
		{"no reference", "Move the pickup to Tuesday between 8 and 10", nil},
		{"reference in the sentence before", "It's PO 4471. Can we move the pickup to Tuesday between 8 and 10?",
			[]string{"pickup PO-4471 2026-11-24T08:00:00-06:00/10:00"}},
		{"window in the sentence after", "We need to move the pickup for PO 4471. Can you do Tuesday morning, 8 to 10?",
			[]string{"pickup PO-4471 2026-11-24T08:00:00-06:00/10:00"}},
		{"two shipments in one clause", "Move the pickup for PO 4471 to Tuesday between 8 and 10 and PO 4472 to Wednesday at 7",
			[]string{"pickup PO-4471 2026-11-24T08:00:00-06:00/10:00", "pickup PO-4472 2026-11-25T07:00:00-06:00/08:00"}},
		{"two shipments, one window", "Move the pickups for PO 4471 and PO 4472 to Tuesday at 8",
			[]string{"pickup PO-4471 2026-11-24T08:00:00-06:00/09:00", "pickup PO-4472 2026-11-24T08:00:00-06:00/09:00"}},
		{"the last statement wins", "Move the pickup for PO 4471 to Tuesday at 8. Actually, change the pickup for PO 4471 to Wednesday at 9 instead.",
			[]string{"pickup PO-4471 2026-11-25T09:00:00-06:00/10:00"}},
		{"negated pickup", "We can't move the pickup for PO 4471 to Tuesday.", nil},
		{"no need to move", "There's no need to move the pickup for PO 4471.", nil},
		{"a pickup stated, not changed", "The pickup for PO 4471 is Tuesday between 8 and 10.", nil},

		// next_call
		{"talk again next Wednesday", "Let's talk again next Wednesday.", []string{"next 2026-12-02"}},
		{"call you back on Monday", "I'll call you back on Monday", []string{"next 2026-11-30"}},
		{"follow up tomorrow", "follow up tomorrow", []string{"next 2026-11-24"}},
		{"speak on December 3rd", "ok let's speak on December 3rd", []string{"next 2026-12-03"}},
		{"talk to you Friday", "Talk to you Friday!", []string{"next 2026-11-27"}},
		{"touch base, day after tomorrow", "lets touch base the day after tomorrow", []string{"next 2026-11-25"}},
		{"be calling on the 1st", "I'll be calling you on the 1st.", []string{"next 2026-12-01"}},
		{"the last one wins", "Let's talk Monday. Actually, call me Tuesday instead.", []string{"next 2026-11-24"}},
		{"speaker turns on lines", "Agent: I'll send the rates by Friday.\nCustomer: Great, talk Monday.",
			[]string{"rate  due 2026-11-27", "next 2026-11-30"}},
		{"circle back", "Let's circle back on Friday.", []string{"next 2026-11-27"}},
		{"call me back with a time", "call me back the day after tomorrow at 3", []string{"next 2026-11-25"}},
		{"thanks for the call today", "Thanks for the call today.", nil},
		{"good talking today", "Good talking today.", nil},
		{"talk without a date", "Talk soon.", nil},
		{"negated call", "Let's not talk about Friday.", nil},

		// several kinds
		{"rate and next call in one sentence", "I'll send you the rate sheet by Friday, and let's talk again next Thursday",
			[]string{"rate  due 2026-11-27", "next 2026-12-03"}},
		{"all three", "Thanks for the call. I'll send the rates for Chicago to Dallas by Wednesday. Please move the pickup for PO 4471 to Tuesday between 8 and 10 am. Let's talk again next Monday.",
			[]string{"rate Chicago to Dallas due 2026-11-25", "pickup PO-4471 2026-11-24T08:00:00-06:00/10:00", "next 2026-11-30"}},
		{"nothing", "The driver checked in at the dock in Joliet and the trailer is loading now.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := extract.RuleExtractor{}.Extract(context.Background(), crm.ExtractInput{CallID: "c", Text: tt.text, StartedAt: monday})
			if err != nil {
				t.Fatal(err)
			}
			if d := describe(got); !slices.Equal(d, tt.want) {
				t.Errorf("%q\n got %q\nwant %q", tt.text, d, tt.want)
			}
		})
	}
}

func TestExtractDST(t *testing.T) {
	t.Parallel()
	chicago := mustZone(t, "America/Chicago")
	tests := []struct {
		name    string
		started time.Time
		text    string
		want    []string
	}{
		{"fall back: the window spans the repeated hour", time.Date(2026, 10, 30, 10, 0, 0, 0, chicago),
			"Move the pickup for PO 1 to Sunday between 1 and 3 am.",
			[]string{"pickup PO-1 2026-11-01T01:00:00-05:00/03:00"}},
		{"spring forward: 2 am is 3 am, so 2 to 3 am is empty", time.Date(2026, 3, 6, 10, 0, 0, 0, chicago),
			"Move the pickup for PO 1 to Sunday from 2 to 3 am.", nil},
		{"spring forward: 1 to 2 am ends at the jump", time.Date(2026, 3, 6, 10, 0, 0, 0, chicago),
			"Move the pickup for PO 1 to Sunday from 1 to 2 am.",
			[]string{"pickup PO-1 2026-03-08T01:00:00-06:00/03:00"}},
		{"spring forward: at 2:30 starts at 3 am", time.Date(2026, 3, 6, 10, 0, 0, 0, chicago),
			"Move the pickup for PO 1 to Sunday at 2:30 am.",
			[]string{"pickup PO-1 2026-03-08T03:00:00-05:00/04:00"}},
		{"spring forward: 1 to 4 am is two hours", time.Date(2026, 3, 6, 10, 0, 0, 0, chicago),
			"Move the pickup for PO 1 to Sunday from 1 to 4 am.",
			[]string{"pickup PO-1 2026-03-08T01:00:00-06:00/04:00"}},
		{"an evening call in UTC terms is still the local day", time.Date(2026, 11, 30, 4, 30, 0, 0, time.UTC),
			"Let's talk tomorrow.", []string{"next 2026-11-30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := extract.RuleExtractor{}.Extract(context.Background(), crm.ExtractInput{CallID: "c", Text: tt.text, StartedAt: tt.started, Location: chicago})
			if err != nil {
				t.Fatal(err)
			}
			if d := describe(got); !slices.Equal(d, tt.want) {
				t.Errorf("got %q, want %q", d, tt.want)
			}
			for _, a := range got {
				if a.Window != nil && !a.Window.Start.Before(a.Window.End) {
					t.Errorf("window %v is empty", a.Window)
				}
			}
		})
	}
}

func TestExtractNote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chicago := mustZone(t, "America/Chicago")
	started := time.Date(2026, 11, 23, 9, 0, 0, 0, chicago)

	t.Run("excerpt cut on a word boundary", func(t *testing.T) {
		t.Parallel()
		text := "Thanks   for\nthe call, we will see." // white space collapses
		got, err := extract.RuleExtractor{MaxNoteRunes: 16}.Extract(ctx, crm.ExtractInput{CallID: "c1", Text: text, StartedAt: started})
		if err != nil {
			t.Fatal(err)
		}
		if want := "Call c1: no follow-up requested\n\nThanks for the…"; got[0].Text != want {
			t.Errorf("note %q, want %q", got[0].Text, want)
		}
	})
	t.Run("default length is 500 runes", func(t *testing.T) {
		t.Parallel()
		text := strings.Repeat("héllo ", 200)
		got, err := extract.RuleExtractor{}.Extract(ctx, crm.ExtractInput{CallID: "c1", Text: text, StartedAt: started})
		if err != nil {
			t.Fatal(err)
		}
		_, ex, _ := strings.Cut(got[0].Text, "\n\n")
		if n := len([]rune(ex)); n > extract.MaxNoteRunesDefault || n < extract.MaxNoteRunesDefault-6 || !strings.HasSuffix(ex, "héllo…") {
			t.Errorf("excerpt of %d runes %q", n, ex)
		}
	})
	t.Run("a long word is cut hard", func(t *testing.T) {
		t.Parallel()
		got, err := extract.RuleExtractor{MaxNoteRunes: 5}.Extract(ctx, crm.ExtractInput{CallID: "c1", Text: "abcdefghij", StartedAt: started})
		if err != nil {
			t.Fatal(err)
		}
		if want := "Call c1: no follow-up requested\n\nabcd…"; got[0].Text != want {
			t.Errorf("note %q, want %q", got[0].Text, want)
		}
	})
	t.Run("negative MaxNoteRunes: summary only", func(t *testing.T) {
		t.Parallel()
		got, err := extract.RuleExtractor{MaxNoteRunes: -1}.Extract(ctx, crm.ExtractInput{CallID: "c1", Text: "Let's talk tomorrow.", StartedAt: started})
		if err != nil {
			t.Fatal(err)
		}
		if want := "Call c1: next call 2026-11-24"; got[0].Text != want {
			t.Errorf("note %q, want %q", got[0].Text, want)
		}
	})
	t.Run("empty transcript", func(t *testing.T) {
		t.Parallel()
		got, err := extract.RuleExtractor{}.Extract(ctx, crm.ExtractInput{Text: " ", StartedAt: started})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Text != "Call: no follow-up requested" {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("zero StartedAt asks the clock, in the tenant's zone", func(t *testing.T) {
		t.Parallel()
		// 04:30 UTC on Monday is still Sunday evening in Chicago.
		stub := clock.NewStub(time.Date(2026, 11, 30, 4, 30, 0, 0, time.UTC))
		got, err := extract.RuleExtractor{Clock: stub}.Extract(ctx, crm.ExtractInput{CallID: "c1", Text: "Let's talk tomorrow.", Location: chicago})
		if err != nil {
			t.Fatal(err)
		}
		if d := describe(got); !slices.Equal(d, []string{"next 2026-11-30"}) {
			t.Errorf("got %q", d)
		}
	})
	t.Run("nil Location: StartedAt's own zone", func(t *testing.T) {
		t.Parallel()
		got, err := extract.RuleExtractor{}.Extract(ctx, crm.ExtractInput{CallID: "c1",
			Text: "Move the pickup for PO 7 to tomorrow at 9.", StartedAt: time.Date(2026, 11, 23, 23, 30, 0, 0, time.FixedZone("", -8*3600))})
		if err != nil {
			t.Fatal(err)
		}
		if d := describe(got); !slices.Equal(d, []string{"pickup PO-7 2026-11-24T09:00:00-08:00/10:00"}) {
			t.Errorf("got %q", d)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := (extract.RuleExtractor{}).Extract(cctx, crm.ExtractInput{CallID: "c1", Text: "hi", StartedAt: started}); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
	t.Run("start out of range", func(t *testing.T) {
		t.Parallel()
		if _, err := (extract.RuleExtractor{}).Extract(ctx, crm.ExtractInput{CallID: "c1", Text: "hi", StartedAt: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}); err == nil {
			t.Error("no error for a start in the year 9999")
		}
	})
}

// BenchmarkExtract measures a recording-sized transcript and a large
// adversarial one (one long sentence of pickup and rate clauses), which must
// stay linear.
func BenchmarkExtract(b *testing.B) {
	started := time.Date(2026, 11, 23, 9, 12, 40, 0, mustZone(b, "America/Chicago"))
	for _, bb := range []struct{ name, text string }{
		{"recording", "I'll send you the rate sheet for Atlanta to Charlotte by Monday, and let's talk again next Thursday."},
		{"large", strings.Repeat("move the pickup for PO 1 and PO 2 to 3 pm, please, I'll send rates for A to B by Friday, ", 2000)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.text)))
			for b.Loop() {
				if _, err := (extract.RuleExtractor{}).Extract(context.Background(), crm.ExtractInput{CallID: "b", Text: bb.text, StartedAt: started}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
