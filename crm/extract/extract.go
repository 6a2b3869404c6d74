package extract

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"
)

// MaxNoteRunesDefault is RuleExtractor.MaxNoteRunes when left zero.
const MaxNoteRunesDefault = 500

// WindowDefaultLength is the length of a pickup window given by a single
// time ("December 3rd at 9" is 09:00–10:00).
const WindowDefaultLength = time.Hour

// RuleExtractor is a deterministic, rule-based [crm.Extractor]: no model, no
// network, the same actions for the same input on every run. The zero value
// is ready to use.
//
// It reads the transcript sentence by sentence; a sentence is split into
// clauses where a new subject or a proposal starts (", and let's talk ...",
// "... by Friday and we can ..."), so that a rate promise and a next call in
// one sentence keep their own dates. In a clause:
//
//   - rate_sheet_promised: a rate object ("rate sheet", "rates", "rate",
//     "quote", "pricing", "price") with a delivering verb ("send",
//     "send over", "email", "forward", "share", "provide", "shoot", "get ...
//     you/over", "have ... to you", "put together", "work up", or "quote" after
//     "will"/"'ll"/"can"/"to"). Lanes are "<Origin> to <Destination>" pairs of
//     the clause, else of the sentence, else of the whole transcript (see
//     lanes below). Due is the date phrase after "by", "before", "until",
//     "no later than" or "due" in the clause, else the clause's last date
//     phrase, else one from a clause of the sentence that holds no action of
//     its own; no date phrase: Due is left empty. One action per promising
//     clause, exact repeats dropped.
//   - pickup_window_change: "pickup"/"pick-up"/"pick up" with a change word
//     ("move", "change", "reschedule", "push", "shift", "bump", "switch",
//     "update", "adjust", "instead", "new", in any tense), a shipment
//     reference and a day. The reference ("PO 4471", "PO-4471", "P.O. #4471",
//     "PO number 4471", "shipment 5820", "BOL 12345", "load 778",
//     "PRO 123") is normalised to its prefix in upper case, a hyphen and the
//     digits ("PO-4471", "SHIPMENT-5820"); the prefix nearest the number wins
//     ("shipment PO 4471" is "PO-4471"). Without one in the sentence, the
//     transcript's only reference is used; with none or several, no action.
//     The window is the clause's first time phrase (see Times below) on the
//     date phrase nearest to it, in Location; a day with no time is the
//     whole day, [00:00, next 00:00); a time with no day gives no action.
//     The clauses of the sentence without an action of their own are read
//     too, and when the sentence names neither a day nor a time, the next
//     sentence, if it holds no action of its own ("... move the pickup for PO
//     4471. Can you do Tuesday between 8 and 10?"). A clause naming several
//     references reads each up to the next ("PO 4471 to Tuesday at 8 and PO
//     4472 to Wednesday at 7"); one with no day of its own shares the next
//     one's ("PO 4471 and PO 4472 to Tuesday at 8"). One action per
//     reference, the last statement winning.
//   - next_call: a contact verb ("talk", "speak", "chat", "call", "meet",
//     "connect", "follow up", "touch base", "catch up", "check in",
//     "circle back", "reconnect", "regroup", "sync") in a proposal frame: up
//     to three words after "let's", "will"/"'ll", "shall", "can", "could",
//     "should", "to", "please", "next", "schedule", "set up", "book",
//     "arrange", "gonna", "wanna", "follow-up", or at the start of the clause (an imperative: "Call me
//     Monday"), or followed by "back"/"again"; "-ing" forms only after "be",
//     "I'm", "we're". "Thanks for the call today" and "Good talking today"
//     are therefore no next call. Date: the clause's first date phrase after
//     the verb, else its last before it, else one from a clause without an
//     action. At most one next_call: the last one in the transcript wins.
//
// Times: "between 8 and 10 am", "from 7 to 9", "1 to 3 pm", "1-3pm",
// "8:30 to 10", "at 9", "around nine thirty", "9 am", "noon", "14:00";
// numbers as words up to twelve ("eight and ten a.m."), "am"/"a.m."/"AM",
// "in the morning", "in the afternoon". A single time is a window of
// WindowDefaultLength (one hour): "December 3rd at 9" is 09:00–10:00. A
// number without am/pm or a colon is a time only after "at", "around",
// "between", "from" or in a range; the digits of a shipment reference and
// the words of a date never are. Am/pm, when not said on both ends:
//
//   - said at the end only ("8 and 10 am", "1 to 3 pm"): the start shares it
//     unless that puts the start at or after the end ("11 to 1 pm" is 11 am
//     to 1 pm);
//   - said at the start only ("10 am to 2"): the end shares it unless that
//     puts the end at or before the start (10 am to 2 pm);
//   - said nowhere: "morning"/"afternoon"/"evening" after the day
//     ("Tuesday morning 8 to 10") sets the start's half; otherwise 6–11 are
//     am and 12 and 1–5 are pm (freight hours); the end is the first of its
//     am/pm readings after the start ("8 to 10" is 8–10 am, "1 to 3" 1–3 pm,
//     "11 to 1" 11 am–1 pm, "at 5" 5 pm).
//
// A range that would cross midnight is refused. On a DST change a repeated
// wall time is its first occurrence and a wall time in the spring-forward gap
// is the instant the gap ends; a window that is then empty is refused.
//
// Negation: a trigger verb with "not", "no", "never", "unable" or a "n't"
// word ("can't", "won't", "don't") up to four words before it in the same
// clause (no comma between) yields no action: "I can't send the rate sheet"
// and "no need to move the pickup" are ignored. The search stops at "I'll",
// "we'll", "let's", "I'm", "we're", and "no problem", "no worries" are no
// negation ("No problem I'll send the rates" is a promise). Limits: that also drops "I
// can't send the rate sheet until Monday" and "don't forget to send me the
// rates"; negation after the verb ("send the rates? not yet") is not seen;
// sarcasm, reported speech and who says what are not modelled. The past tense
// of "send" ("I sent you the rates") is not a promise.
//
// Lanes: around each "to" in the clause, the run of up to four city words
// before it and after it. A city word is a word that is not in a list of
// common English words and keywords, not a date or number word; in a
// sentence with mixed case (capitals beyond its first word and "I") it must
// also be capitalised ("New York", "Salt Lake City", "St. Louis"). Lists joined by "and" or commas give one lane per
// pair. Lanes are written "Chicago to Dallas": words kept as transcribed
// when mixed case, else title-cased; repeats dropped. In an all-lower-case
// transcript the word list is the only guard, so an unusual word next to
// "to" can pass for a city.
//
// Actions come in the order call_note, rate_sheet_promised,
// pickup_window_change, next_call; within a kind, in transcript order.
// Dates (Due, Date) are YYYY-MM-DD in Location; see ResolveDate for the
// date phrases and their rules.
type RuleExtractor struct {
	// Clock gives now, read in UTC, when crm.ExtractInput.StartedAt is
	// zero. Default (nil): clock.System.
	Clock clock.Clock
	// MaxNoteRunes caps the transcript excerpt in the call_note, in runes,
	// "…" included; a longer transcript is cut at the last word boundary
	// that fits. 0: MaxNoteRunesDefault (500). Negative: no excerpt, the
	// note holds the summary only.
	MaxNoteRunes int
}

var _ crm.Extractor = RuleExtractor{}

// WithDefaults returns e with its zero fields set to their defaults.
func (e RuleExtractor) WithDefaults() RuleExtractor {
	if e.Clock == nil {
		e.Clock = clock.System{}
	}
	if e.MaxNoteRunes == 0 {
		e.MaxNoteRunes = MaxNoteRunesDefault
	}
	return e
}

// Extract returns the call's actions: exactly one call_note, first, then the
// rate_sheet_promised, pickup_window_change and next_call actions the text
// supports (see RuleExtractor). It fails only when ctx is done or the call's
// start lies outside the years 1–9998.
//
// The call_note reads "Call <call_id>: <summary>", a blank line and the
// excerpt, where the summary lists what was extracted ("rate sheet promised
// for 2 lanes by 2026-11-27; pickup change for PO-4471 (2026-11-24
// 08:00-10:00); next call 2026-12-02") or says "no follow-up requested".
func (e RuleExtractor) Extract(ctx context.Context, in crm.ExtractInput) ([]crm.Action, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("extracting actions for call %s: %w", in.CallID, err)
	}
	e = e.WithDefaults()
	ref := in.StartedAt
	if ref.IsZero() {
		ref = e.Clock.Now().UTC()
	}
	if in.Location != nil {
		ref = ref.In(in.Location)
	}
	if y := ref.Year(); y < 1 || y > 9998 {
		return nil, fmt.Errorf("extracting actions for call %s: call start %s is outside the years 1-9998", in.CallID, ref.Format(time.RFC3339))
	}

	found := extractRules(in.Text, ref)
	actions := make([]crm.Action, 0, 1+len(found))
	actions = append(actions, crm.Action{Kind: crm.KindCallNote, Text: noteText(in.CallID, in.Text, found, e.MaxNoteRunes)})
	actions = append(actions, found...)
	return actions, nil
}

// noteText is the call_note: the summary, a blank line and the excerpt.
func noteText(callID, text string, found []crm.Action, maxRunes int) string {
	var parts []string
	for _, a := range found {
		switch a.Kind {
		case crm.KindRateSheetPromised:
			s := "rate sheet promised"
			switch len(a.Lanes) {
			case 0:
			case 1:
				s += " for 1 lane"
			default:
				s += fmt.Sprintf(" for %d lanes", len(a.Lanes))
			}
			if a.Due != "" {
				s += " by " + a.Due
			}
			parts = append(parts, s)
		case crm.KindPickupWindowChange:
			parts = append(parts, fmt.Sprintf("pickup change for %s (%s)", a.ShipmentRef, windowSummary(a.Window)))
		case crm.KindNextCall:
			parts = append(parts, "next call "+a.Date)
		}
	}
	summary := "no follow-up requested"
	if len(parts) > 0 {
		summary = strings.Join(parts, "; ")
	}
	head := "Call " + callID + ": " + summary
	if callID == "" {
		head = "Call: " + summary
	}
	if maxRunes < 0 {
		return head
	}
	ex := excerpt(text, maxRunes)
	if ex == "" {
		return head
	}
	return head + "\n\n" + ex
}

// windowSummary is "2026-11-24 08:00-10:00", or the date alone for a
// whole-day window.
func windowSummary(w *crm.Window) string {
	if w == nil {
		return "no window"
	}
	s, e := w.Start, w.End
	if s.Equal(startOfDay(s)) && e.Equal(addDays(s, 1)) {
		return s.Format(time.DateOnly)
	}
	if s.Format("2006-01-02") == e.Format("2006-01-02") {
		return s.Format("2006-01-02 15:04") + "-" + e.Format("15:04")
	}
	return s.Format("2006-01-02 15:04") + " to " + e.Format("2006-01-02 15:04")
}

// excerpt is text with its white space collapsed, at most maxRunes runes:
// a longer text is cut at the last space that leaves room for "…".
func excerpt(text string, maxRunes int) string {
	text = strings.Join(strings.Fields(strings.ToValidUTF8(text, "\uFFFD")), " ")
	if utf8.RuneCountInString(text) <= maxRunes {
		return text
	}
	if maxRunes == 1 {
		return "…"
	}
	rs := []rune(text)[:maxRunes-1]
	cut := len(rs)
	for i := len(rs) - 1; i > 0; i-- {
		if rs[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(rs[:cut]), " ") + "…"
}
