package extract

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/callscribe/callscribe/crm"
)

// sentence is one sentence of a transcript and its clauses.
type sentence struct {
	toks    []token
	clauses [][2]int
	cased   bool // mixed case: city names must be capitalised
	// per clause: the index of the trigger word of each kind, or -1
	rate, pickup, contact []int
	refs                  []shipmentRef

	allLanes   []string     // the lanes of the whole sentence
	lanesDone  bool         // allLanes has been computed
	refTokens  map[int]bool // the tokens of refs, which are never times
	unownedWin *windowParts // see unownedParts
	unowned    *dateMatch   // the first date of a clause without an action
	unownedOK  bool         // unowned has been looked for
}

func (s *sentence) owned(c int) bool { return s.rate[c] >= 0 || s.pickup[c] >= 0 || s.contact[c] >= 0 }

func (s *sentence) hasAction() bool {
	for c := range s.clauses {
		if s.owned(c) {
			return true
		}
	}
	return false
}

// shipmentRef is a normalised reference ("PO-4471") found at toks[start:end].
type shipmentRef struct {
	norm       string
	start, end int
}

// extractRules returns the actions other than the call_note, in the order
// rate_sheet_promised, pickup_window_change, next_call.
func extractRules(text string, ref time.Time) []crm.Action {
	var sents []*sentence
	for _, toks := range sentences(tokenize(text)) {
		s := &sentence{toks: toks, clauses: clauses(toks), cased: isCased(toks), refs: findRefs(toks)}
		for _, c := range s.clauses {
			s.rate = append(s.rate, rateTrigger(toks, c[0], c[1]))
			s.pickup = append(s.pickup, pickupTrigger(toks, c[0], c[1]))
			s.contact = append(s.contact, contactTrigger(toks, c[0], c[1]))
		}
		sents = append(sents, s)
	}

	t := &transcript{sents: sents}
	var rates, pickups []crm.Action
	seenRates := map[string]bool{}
	lastPickup := map[string]int{} // shipment ref → index in pickups
	var next *crm.Action
	for si, s := range sents {
		for ci, c := range s.clauses {
			if s.rate[ci] >= 0 {
				a := crm.Action{Kind: crm.KindRateSheetPromised, Lanes: lanes(s.toks, c[0], c[1], s.cased)}
				if len(a.Lanes) == 0 {
					a.Lanes = s.lanes()
				}
				if len(a.Lanes) == 0 {
					a.Lanes = t.lanes()
				}
				if d, ok := dueDate(s, ci, ref); ok {
					a.Due = d.Format(time.DateOnly)
				}
				if key := a.Due + "\x00" + strings.Join(a.Lanes, "\x00"); !seenRates[key] {
					seenRates[key] = true
					rates = append(rates, a)
				}
			}
			if s.pickup[ci] >= 0 {
				for _, a := range pickupActions(t, si, ci, ref) {
					if i, ok := lastPickup[a.ShipmentRef]; ok {
						pickups[i] = crm.Action{} // superseded; dropped below
					}
					lastPickup[a.ShipmentRef] = len(pickups)
					pickups = append(pickups, a)
				}
			}
			if s.contact[ci] >= 0 {
				if d, ok := nextCallDate(s, ci, ref); ok {
					next = &crm.Action{Kind: crm.KindNextCall, Date: d.Format(time.DateOnly)}
				}
			}
		}
	}
	out := append(rates, slices.DeleteFunc(pickups, func(a crm.Action) bool { return a.Kind == "" })...)
	if next != nil {
		out = append(out, *next)
	}
	return out
}

// lanes is every lane of the sentence.
func (s *sentence) lanes() []string {
	if !s.lanesDone {
		s.lanesDone = true
		s.allLanes = lanes(s.toks, 0, len(s.toks), s.cased)
	}
	return slices.Clone(s.allLanes)
}

// transcript is the sentences of a transcript with what is computed once
// for all of them.
type transcript struct {
	sents     []*sentence
	allLanes  []string
	allRefs   []string
	lanesDone bool
	refsDone  bool
}

// lanes is every lane of the transcript, for a rate promise whose sentence
// names none.
func (t *transcript) lanes() []string {
	if !t.lanesDone {
		t.lanesDone = true
		seen := map[string]bool{}
		for _, s := range t.sents {
			for _, l := range s.lanes() {
				if !seen[l] {
					seen[l] = true
					t.allLanes = append(t.allLanes, l)
				}
			}
		}
	}
	return slices.Clone(t.allLanes)
}

// refs is every distinct shipment reference of the transcript.
func (t *transcript) refs() []string {
	if !t.refsDone {
		t.refsDone = true
		seen := map[string]bool{}
		for _, s := range t.sents {
			for _, r := range s.refs {
				if !seen[r.norm] {
					seen[r.norm] = true
					t.allRefs = append(t.allRefs, r.norm)
				}
			}
		}
	}
	return t.allRefs
}

// isCased reports whether a sentence has mixed case beyond its first word
// and "I": then capitals mark names.
func isCased(toks []token) bool {
	var upper, lower bool
	words := 0
	for _, t := range toks {
		if !t.isWord() {
			continue
		}
		words++
		for _, r := range t.raw {
			switch {
			case unicode.IsUpper(r):
				if words > 1 && !strings.HasPrefix(t.low, "i'") && t.low != "i" {
					upper = true
				}
			case unicode.IsLower(r):
				lower = true
			}
		}
	}
	return upper && lower
}

// negators make a trigger up to four words after them void.
var negators = set("not", "no", "never", "unable", "cannot", "cant", "wont", "dont", "didnt", "nope")

// commitments stop the backward search for a negation: "no problem I'll
// send the rates" is a promise.
var commitments = set("i'll", "we'll", "let's", "lets", "i'm", "we're")

// negated reports a negation up to four words before toks[i] in the clause
// starting at from, not across a comma.
func negated(toks []token, from, i int) bool {
	for k := i - 1; k >= from && k >= i-4; k-- {
		t := toks[k]
		if !t.isWord() || commitments[t.low] {
			return false
		}
		if t.low == "no" && k+1 < len(toks) && (toks[k+1].low == "problem" || toks[k+1].low == "worries" || toks[k+1].low == "doubt") {
			continue
		}
		if negators[t.low] || strings.HasSuffix(t.low, "n't") {
			return true
		}
	}
	return false
}

var (
	rateObjects    = set("rate", "rates", "quote", "quotes", "pricing", "price", "prices", "ratesheet", "rate-sheet", "tariff")
	deliverVerbs   = set("send", "sending", "email", "emailing", "e-mail", "forward", "forwarding", "share", "sharing", "provide", "providing", "shoot", "text", "fax", "prepare", "preparing")
	handOverVerbs  = set("get", "getting", "have", "put", "putting", "work", "working")
	handOverMarks  = set("you", "over", "out", "across", "back", "together", "up")
	quoteModals    = set("will", "can", "could", "to", "gonna", "me", "shall")
	pickupWords    = set("pickup", "pickups", "pick-up", "pick-ups")
	pickupChanges  = set("move", "moved", "moving", "change", "changed", "changing", "reschedule", "rescheduled", "rescheduling", "re-schedule", "push", "pushed", "pushing", "shift", "shifted", "shifting", "bump", "bumped", "bumping", "switch", "switched", "switching", "update", "updated", "updating", "adjust", "adjusted", "adjusting", "instead", "new")
	contactVerbs   = set("talk", "speak", "chat", "call", "ring", "phone", "meet", "connect", "reconnect", "regroup", "sync")
	contactGerunds = set("talking", "speaking", "chatting", "calling", "meeting", "connecting", "following", "touching", "catching", "checking", "circling", "reaching")
	phrasalVerbs   = map[string]string{"follow": "up", "touch": "base", "catch": "up", "check": "in", "circle": "back", "reach": "out",
		"following": "up", "touching": "base", "catching": "up", "checking": "in", "circling": "back", "reaching": "out"}
	proposalFrames = set("let's", "lets", "let", "will", "shall", "can", "could", "should", "to", "please", "next", "schedule", "set", "book", "arrange", "follow-up", "gonna", "wanna", "we'll", "i'll")
	gerundFrames   = set("be", "i'm", "we're", "im")
	clauseFillers  = set("ok", "okay", "so", "and", "well", "yeah", "yes", "great", "alright", "sure", "then", "also", "just", "perfect", "cool", "but")
)

// rateTrigger is the index of the delivering verb of a rate promise in
// toks[from:to], or -1.
func rateTrigger(toks []token, from, to int) int {
	hasObject := false
	for k := from; k < to; k++ {
		if rateObjects[toks[k].low] {
			hasObject = true
		}
	}
	if !hasObject {
		return -1
	}
	for k := from; k < to; k++ {
		w := toks[k].low
		verb := deliverVerbs[w]
		if handOverVerbs[w] {
			for j := k + 1; j < to && j <= k+6; j++ {
				if handOverMarks[toks[j].low] {
					verb = true
					break
				}
			}
		}
		if (w == "quote" || w == "quoting") && k > from {
			p := toks[k-1].low
			verb = verb || quoteModals[p] || strings.HasSuffix(p, "'ll") || p == "be"
		}
		if verb && !negated(toks, from, k) {
			return k
		}
	}
	return -1
}

// pickupTrigger is the index of the change word of a pickup change in
// toks[from:to], or -1.
func pickupTrigger(toks []token, from, to int) int {
	has := false
	for k := from; k < to; k++ {
		if pickupWords[toks[k].base()] || toks[k].low == "pick" && k+1 < to && toks[k+1].low == "up" {
			has = true
		}
	}
	if !has {
		return -1
	}
	for k := from; k < to; k++ {
		if pickupChanges[toks[k].low] && !negated(toks, from, k) {
			return k
		}
	}
	return -1
}

// contactTrigger is the index of a contact verb in a proposal frame in
// toks[from:to], or -1.
func contactTrigger(toks []token, from, to int) int {
	first := from
	for first < to && (clauseFillers[toks[first].low] || !toks[first].isWord()) {
		first++
	}
	for k := from; k < to; k++ {
		w := toks[k].low
		phrasal, isPhrasal := phrasalVerbs[w]
		if isPhrasal && (k+1 >= to || toks[k+1].low != phrasal) {
			continue
		}
		gerund := contactGerunds[w]
		if !contactVerbs[w] && !gerund && !isPhrasal {
			continue
		}
		if strings.HasSuffix(w, "ing") {
			gerund = true
		}
		framed := false
		for j := k - 1; j >= from && j >= k-3; j-- {
			p := toks[j].low
			if gerund && gerundFrames[p] || !gerund && (proposalFrames[p] || strings.HasSuffix(p, "'ll")) {
				framed = true
				break
			}
		}
		if !gerund {
			if k == first {
				framed = true
			}
			n := k + 1
			if isPhrasal {
				n++
			}
			if n < to && (toks[n].low == "back" || toks[n].low == "again") ||
				n+1 < to && (toks[n].low == "you" || toks[n].low == "me" || toks[n].low == "us") && (toks[n+1].low == "back" || toks[n+1].low == "again") {
				framed = true
			}
		}
		if framed && !negated(toks, from, k) {
			return k
		}
	}
	return -1
}

var refPrefixes = set("po", "bol", "pro", "shipment", "load")
var refFillers = set("number", "no", "num", "nr", "id", "-", ".", ":", "#")

// findRefs returns the shipment references of a sentence: a prefix, optional
// "number"/"no."/"-", and 1–15 digits. The prefix nearest the digits wins.
func findRefs(toks []token) []shipmentRef {
	var out []shipmentRef
	for i := 0; i < len(toks); i++ {
		if !refPrefixes[toks[i].low] {
			continue
		}
		j := i + 1
		for j < len(toks) && j <= i+3 && refFillers[toks[j].low] {
			j++
		}
		if j < len(toks) && isDigits(toks[j].low) && len(toks[j].low) <= 15 {
			out = append(out, shipmentRef{norm: strings.ToUpper(toks[i].low) + "-" + toks[j].low, start: i, end: j + 1})
			i = j
		}
	}
	return out
}

// dueDate is the due date of the rate promise in clause c: a date after
// "by"/"before"/"until"/"till"/"due"/"no later than" in the clause, else
// its last date, else the first date of a clause without an action.
func dueDate(s *sentence, c int, ref time.Time) (time.Time, bool) {
	cl := s.clauses[c]
	dates := findDates(s.toks, cl[0], cl[1], ref)
	for _, d := range dates {
		if d.start > 0 {
			p := s.toks[d.start-1].low
			if p == "by" || p == "before" || p == "until" || p == "till" || p == "due" || p == "than" {
				return d.day, true
			}
		}
	}
	if len(dates) > 0 {
		return dates[len(dates)-1].day, true
	}
	return unownedDate(s, ref)
}

// nextCallDate is the date of the contact verb's clause: the first date
// after the verb, else the last before it, else the first date of a clause
// without an action.
func nextCallDate(s *sentence, c int, ref time.Time) (time.Time, bool) {
	cl := s.clauses[c]
	dates := findDates(s.toks, cl[0], cl[1], ref)
	verb := s.contact[c]
	for _, d := range dates {
		if d.start > verb {
			return d.day, true
		}
	}
	if len(dates) > 0 {
		return dates[len(dates)-1].day, true
	}
	return unownedDate(s, ref)
}

func unownedDate(s *sentence, ref time.Time) (time.Time, bool) {
	if !s.unownedOK {
		s.unownedOK = true
		for ci, cl := range s.clauses {
			if s.owned(ci) {
				continue
			}
			if dates := findDates(s.toks, cl[0], cl[1], ref); len(dates) > 0 {
				s.unowned = &dates[0]
				break
			}
		}
	}
	if s.unowned == nil {
		return time.Time{}, false
	}
	return s.unowned.day, true
}

// pickupActions builds the pickup_window_change actions of clause c of
// sentence si: one per reference when the clause names several ("PO 4471 to
// Tuesday at 8 and PO 4472 to Wednesday at 7", each reference reading up to
// the next), else one.
func pickupActions(t *transcript, si, c int, ref time.Time) []crm.Action {
	sents := t.sents
	s := sents[si]
	cl := s.clauses[c]
	lo, _ := slices.BinarySearchFunc(s.refs, cl[0], func(r shipmentRef, at int) int { return r.start - at })
	var inClause []shipmentRef
	for _, r := range s.refs[lo:] {
		if r.end > cl[1] {
			break
		}
		inClause = append(inClause, r)
	}
	if len(inClause) > 1 {
		// Read back to front so that a reference with no day of its own
		// shares the next one's: "PO 4471 and PO 4472 to Tuesday at 8".
		out := make([]crm.Action, 0, len(inClause))
		var shared *crm.Window
		for k := len(inClause) - 1; k >= 0; k-- {
			seg := [2]int{cl[0], cl[1]}
			if k > 0 {
				seg[0] = inClause[k].start
			}
			if k+1 < len(inClause) {
				seg[1] = inClause[k+1].start
			}
			w, found, ok := pickupWindow(s.partsIn(seg, ref))
			switch {
			case ok:
				shared = w
			case found:
				shared = nil
				continue
			case shared != nil:
				cp := *shared
				w = &cp
			default:
				continue
			}
			out = append(out, crm.Action{Kind: crm.KindPickupWindowChange, ShipmentRef: inClause[k].norm, Window: w})
		}
		slices.Reverse(out)
		return out
	}

	shipment := ""
	switch {
	case len(inClause) == 1:
		shipment = inClause[0].norm
	case len(s.refs) > 0:
		shipment = s.refs[0].norm
	default:
		all := t.refs()
		if len(all) != 1 {
			return nil
		}
		shipment = all[0]
	}

	w, found, ok := pickupWindow(s.partsIn(cl, ref), s.unownedParts(ref))
	if !found && si+1 < len(sents) && !sents[si+1].hasAction() {
		n := sents[si+1]
		w, _, ok = pickupWindow(n.partsIn([2]int{0, len(n.toks)}, ref))
	}
	if !ok {
		return nil
	}
	return []crm.Action{{Kind: crm.KindPickupWindowChange, ShipmentRef: shipment, Window: w}}
}

// windowParts are the date phrases and the first time phrase of a range of
// a sentence.
type windowParts struct {
	dates []dateMatch
	tr    *timeRange
}

// partsIn finds the window parts of s.toks[rg[0]:rg[1]]. Times never use
// the tokens of a date phrase or a shipment reference.
func (s *sentence) partsIn(rg [2]int, ref time.Time) windowParts {
	if s.refTokens == nil {
		s.refTokens = map[int]bool{}
		for _, r := range s.refs {
			for k := r.start; k < r.end; k++ {
				s.refTokens[k] = true
			}
		}
	}
	ds := findDates(s.toks, rg[0], rg[1], ref)
	skip := func(k int) bool {
		if s.refTokens[k] {
			return true
		}
		i, found := slices.BinarySearchFunc(ds, k, func(d dateMatch, at int) int { return d.start - at })
		return found || i > 0 && k < ds[i-1].end
	}
	return windowParts{dates: ds, tr: findTime(s.toks, rg[0], rg[1], skip)}
}

// unownedParts are the window parts of the sentence's clauses without an
// action: the dates of the first that has any, the first time of the first
// that has one. Computed once per sentence.
func (s *sentence) unownedParts(ref time.Time) windowParts {
	if s.unownedWin == nil {
		s.unownedWin = &windowParts{}
		for ci, cl := range s.clauses {
			if s.owned(ci) {
				continue
			}
			p := s.partsIn(cl, ref)
			if len(s.unownedWin.dates) == 0 {
				s.unownedWin.dates = p.dates
			}
			if s.unownedWin.tr == nil {
				s.unownedWin.tr = p.tr
			}
		}
	}
	return *s.unownedWin
}

// pickupWindow combines window parts, earlier ones first: the first time
// phrase on the date phrase nearest to it; a date alone is the whole day.
// found reports that a date or a time was seen.
func pickupWindow(parts ...windowParts) (w *crm.Window, found, ok bool) {
	var dates []dateMatch
	var tr *timeRange
	for _, p := range parts {
		if len(dates) == 0 {
			dates = p.dates
		}
		if tr == nil {
			tr = p.tr
		}
	}
	if len(dates) == 0 {
		return nil, tr != nil, false
	}
	if tr == nil {
		return wholeDay(dates[len(dates)-1].day), true, true
	}
	best := dates[0]
	dist := func(d dateMatch) int {
		if d.end <= tr.start {
			return tr.start - d.end
		}
		return d.start - tr.end
	}
	for _, d := range dates[1:] {
		if dist(d) <= dist(best) {
			best = d
		}
	}
	w, ok = window(best.day, *tr, best.part)
	return w, true, ok
}

// findTime is the first time phrase in toks[from:to] that uses no skipped
// token.
func findTime(toks []token, from, to int, skip func(int) bool) *timeRange {
	sub := toks[:to]
outer:
	for i := from; i < to; i++ {
		if skip(i) {
			continue
		}
		r, ok := parseTimeRange(sub, i)
		if !ok {
			continue
		}
		for k := r.start; k < r.end; k++ {
			if skip(k) {
				continue outer
			}
		}
		return &r
	}
	return nil
}

// cityStopWords are never part of a city name.
var cityStopWords = set(
	"a", "an", "the", "and", "or", "but", "so", "to", "from", "for", "of", "on", "in", "at", "by", "with",
	"about", "over", "into", "onto", "via", "per", "up", "down", "out", "off", "back", "again", "also", "too",
	"then", "than", "this", "that", "these", "those", "there", "here", "it", "its", "it's", "i", "i'll",
	"i'm", "i'd", "i've", "me", "my", "we", "we'll", "we're", "we've", "us", "our", "you", "you'll", "your",
	"yours", "he", "she", "they", "them", "their", "his", "her", "him", "who", "what", "when", "where",
	"which", "how", "why", "let's", "lets", "let", "please", "thanks", "thank", "ok", "okay", "yes", "yeah",
	"no", "not", "just", "only", "all", "both", "each", "every", "some", "any", "more", "most", "other",
	"another", "same", "send", "sending", "sent", "get", "getting", "got", "give", "go", "going", "goes",
	"went", "come", "coming", "move", "moved", "moving", "change", "talk", "call", "speak", "be", "is",
	"are", "was", "were", "been", "will", "would", "can", "could", "should", "shall", "may", "might",
	"must", "have", "has", "had", "do", "does", "did", "need", "want", "like", "look", "looking", "run",
	"runs", "running", "ship", "shipping", "shipped", "haul", "hauling", "deliver", "delivered",
	"delivering", "pick", "pickup", "drop", "headed", "heading", "bound", "lane", "lanes", "rate", "rates",
	"sheet", "sheets", "quote", "quotes", "pricing", "price", "prices", "load", "loads", "freight",
	"shipment", "shipments", "truck", "trucks", "trailer", "trailers", "van", "vans", "reefer", "flatbed",
	"dry", "volume", "po", "bol", "pro", "number", "week", "weeks", "day", "days", "today", "tomorrow",
	"morning", "afternoon", "evening", "tonight", "am", "pm", "noon", "next", "last", "way", "time",
	"date", "email", "forward", "share", "customer", "driver", "dock", "warehouse", "everything",
	"something", "anything", "nothing", "route", "routes", "miles", "mile", "between", "options",
	"option", "quick", "good", "great", "thanks", "sure", "both", "rest", "trip", "trips", "return",
	"round", "eod", "cob", "end", "close", "business", "well", "yep", "hi", "hello", "bye", "um", "uh",
)

// isCityWord reports whether t can be part of a city name.
func isCityWord(t token, cased bool) bool {
	if !t.isWord() || cityStopWords[t.low] {
		return false
	}
	for _, r := range t.low {
		if !unicode.IsLetter(r) && r != '-' && r != '\'' {
			return false
		}
	}
	if _, ok := weekdays[t.base()]; ok {
		return false
	}
	if _, ok := months[t.low]; ok && t.low != "may" && t.low != "march" {
		return false
	}
	if _, ok := smallNumbers[t.low]; ok {
		return false
	}
	if _, ok := ordinalDays[t.low]; ok {
		return false
	}
	if cased {
		r, _ := utf8.DecodeRuneInString(t.raw)
		return unicode.IsUpper(r)
	}
	return true
}

// cityAbbrevs take their period along: "St. Louis", "Ft. Worth".
var cityAbbrevs = set("st", "mt", "ft")

// cityBefore is the city ending just before toks[k] (not before from): up to
// four city words, with "St." kept whole.
func cityBefore(toks []token, from, k int, cased bool) []int {
	var idx []int
	for j := k - 1; j >= from && len(idx) < 4; j-- {
		if toks[j].low == "." && j-1 >= from && cityAbbrevs[toks[j-1].low] {
			continue
		}
		if !isCityWord(toks[j], cased) {
			break
		}
		idx = append(idx, j)
	}
	slices.Reverse(idx)
	return idx
}

// cityAfter is the city starting just after toks[k] (before to).
func cityAfter(toks []token, k, to int, cased bool) []int {
	var idx []int
	for j := k + 1; j < to && len(idx) < 4; j++ {
		if toks[j].low == "." && j-1 > k && cityAbbrevs[toks[j-1].low] {
			continue
		}
		if !isCityWord(toks[j], cased) {
			break
		}
		idx = append(idx, j)
	}
	return idx
}

// cityName writes a city as "Salt Lake City": words kept as transcribed
// when they mix case, else title-cased; "St" followed by a period is "St.".
func cityName(toks []token, idx []int) string {
	words := make([]string, len(idx))
	for n, j := range idx {
		raw := toks[j].raw
		if strings.ToLower(raw) == raw || strings.ToUpper(raw) == raw {
			raw = titleCase(strings.ToLower(raw))
		}
		if cityAbbrevs[toks[j].low] && j+1 < len(toks) && toks[j+1].low == "." {
			raw += "."
		}
		words[n] = raw
	}
	return strings.Join(words, " ")
}

// titleCase upper-cases the first letter of s and of each part after a
// hyphen ("winston-salem" is "Winston-Salem").
func titleCase(s string) string {
	rs := []rune(s)
	for i := range rs {
		if i == 0 || rs[i-1] == '-' {
			rs[i] = unicode.ToUpper(rs[i])
		}
	}
	return string(rs)
}

// lanes returns the "<Origin> to <Destination>" pairs of toks[from:to],
// without repeats.
func lanes(toks []token, from, to int, cased bool) []string {
	var out []string
	for k := from; k < to; k++ {
		if toks[k].low != "to" {
			continue
		}
		o, d := cityBefore(toks, from, k, cased), cityAfter(toks, k, to, cased)
		if len(o) == 0 || len(d) == 0 {
			continue
		}
		lane := cityName(toks, o) + " to " + cityName(toks, d)
		if !slices.Contains(out, lane) {
			out = append(out, lane)
		}
	}
	return out
}
