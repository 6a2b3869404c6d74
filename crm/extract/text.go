package extract

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one word or punctuation mark of a transcript.
type token struct {
	raw string // as transcribed (after normalisation), for the case of city names
	low string // lower case; punctuation is one of , . ! ? ; : -
}

func (t token) isWord() bool {
	r, _ := utf8.DecodeRuneInString(t.raw)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// base is the lower-case word without a possessive "'s" ("tuesday's").
func (t token) base() string { return strings.TrimSuffix(t.low, "'s") }

var (
	reAMPM    = regexp.MustCompile(`(?i)\b([ap])\.\s?m\b(\.)?`)
	rePO      = regexp.MustCompile(`(?i)\bp\.\s?o\.`)
	reBOL     = regexp.MustCompile(`(?i)\bb\.\s?o\.\s?l\b\.?|\bbill\s+of\s+lading\b`)
	reISODate = regexp.MustCompile(`\b(\d{4})-(\d{1,2})-(\d{1,2})\b`)
	reHourAM  = regexp.MustCompile(`^(\d{1,2}(?::\d{2})?)(am|pm|a|p)$`)
	reRefGlue = regexp.MustCompile(`^(po|bol|pro)(\d+)$`)
)

// typography is the plain spelling of the typographic characters
// normalise straightens: curly apostrophes, a no-break space, "&".
var typography = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u00a0", " ", "&", " and ")

// normalise rewrites the spellings the tokenizer would tear apart: "a.m." is
// "am" (keeping a sentence end when a capital or the end follows), "P.O." is
// "PO", "B.O.L." and "bill of lading" are "BOL", "2026-12-03" is
// "2026/12/03", "&" is "and"; curly apostrophes are straight.
//
// Each expression runs only on a text holding what every match of it
// holds (in lower case: "p." for "P.O.", "b." or "lading" for "B.O.L.",
// "a." or "p." for "a.m.", "-" for a date): most transcripts hold none,
// and a case-folding expression costs a pass over the whole text.
func normalise(s string) string {
	s = strings.ToValidUTF8(s, " ")
	s = typography.Replace(s)
	low := strings.ToLower(s)
	if strings.Contains(low, "p.") {
		s = rePO.ReplaceAllString(s, "PO ")
	}
	if strings.Contains(low, "b.") || strings.Contains(low, "lading") {
		s = reBOL.ReplaceAllString(s, "BOL ")
	}
	if strings.Contains(s, "-") {
		s = reISODate.ReplaceAllString(s, "$1/$2/$3")
	}
	if !strings.Contains(low, "a.") && !strings.Contains(low, "p.") {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range reAMPM.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		b.WriteString(strings.ToLower(s[m[2]:m[3]]) + "m")
		if m[4] >= 0 { // a final period: keep it when it ends the sentence
			rest := strings.TrimLeft(s[m[1]:], " \t")
			r, _ := utf8.DecodeRuneInString(rest)
			if rest == "" || unicode.IsUpper(r) || r == '\n' {
				b.WriteString(".")
			}
		}
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// tokenize splits text into words and punctuation. A word is a run of
// letters and digits, held together by an apostrophe or hyphen between
// letters ("can't", "Winston-Salem") and by ":", "/" or "." between digits
// ("8:30", "12/3"). Dashes become "-", "…" and line breaks end sentences,
// other symbols are dropped. "10am" is "10" "am" and "PO4471" is "PO" "4471".
func tokenize(text string) []token {
	rs := []rune(normalise(text))
	var out []token
	emit := func(raw string) { out = append(out, token{raw: raw, low: strings.ToLower(raw)}) }
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			j := i + 1
			for j < len(rs) {
				c := rs[j]
				if unicode.IsLetter(c) || unicode.IsDigit(c) {
					j++
					continue
				}
				if j+1 < len(rs) {
					prev, next := rs[j-1], rs[j+1]
					letters := unicode.IsLetter(prev) && unicode.IsLetter(next)
					digits := unicode.IsDigit(prev) && unicode.IsDigit(next)
					if (c == '\'' || c == '-') && letters || (c == ':' || c == '/' || c == '.') && digits {
						j++
						continue
					}
				}
				break
			}
			word := string(rs[i:j])
			low := strings.ToLower(word)
			if m := hourAM(low); m != nil {
				emit(m[1])
				emit(strings.TrimSuffix(m[2], "m") + "m")
			} else if m := refGlue(low); m != nil {
				emit(word[:len(m[1])])
				emit(m[2])
			} else {
				emit(word)
			}
			i = j
		case r == '\n' || r == '…':
			if len(out) > 0 && !isTerminator(out[len(out)-1].low) {
				emit(".")
			}
			i++
		case strings.ContainsRune(",.!?;:", r):
			emit(string(r))
			i++
		case r == '-' || r == '–' || r == '—':
			emit("-")
			i++
		default:
			i++
		}
	}
	return out
}

// hourAM is reHourAM's submatches of a word, run only on a word that
// begins with a digit and ends in "a", "p" or "m", as every match does.
func hourAM(low string) []string {
	if low == "" || !isDigit(low[0]) || !strings.ContainsRune("apm", rune(low[len(low)-1])) {
		return nil
	}
	return reHourAM.FindStringSubmatch(low)
}

// refGlue is reRefGlue's submatches of a word, run only on a word that
// begins with "p" or "b" and ends in a digit, as every match does.
func refGlue(low string) []string {
	if low == "" || low[0] != 'p' && low[0] != 'b' || !isDigit(low[len(low)-1]) {
		return nil
	}
	return reRefGlue.FindStringSubmatch(low)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isTerminator(s string) bool { return s == "." || s == "!" || s == "?" }

// abbreviations whose period does not end a sentence.
var abbreviations = set("st", "mt", "ft", "mr", "mrs", "ms", "dr", "no", "vs", "approx", "ave", "rd",
	"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec")

// sentences splits tokens at ".", "!" and "?", except after an abbreviation
// or a single letter ("St. Louis", "Dec. 3", "U.S."). Terminators are
// dropped; empty sentences are skipped.
func sentences(toks []token) [][]token {
	var out [][]token
	start := 0
	for i, t := range toks {
		if !isTerminator(t.low) {
			continue
		}
		if t.low == "." && i > start {
			p := toks[i-1].low
			if abbreviations[p] || utf8.RuneCountInString(p) == 1 && toks[i-1].isWord() && !isDigits(p) {
				continue
			}
		}
		if i > start {
			out = append(out, toks[start:i])
		}
		start = i + 1
	}
	if start < len(toks) {
		out = append(out, toks[start:])
	}
	return out
}

// clauseStarters begin a new clause after a comma or a conjunction.
var clauseStarters = set("i", "i'll", "i'd", "i'm", "i've", "we", "we'll", "we're", "we'd", "we've",
	"let's", "lets", "let", "you", "you'll", "you're", "he", "she", "they", "they'll", "it'll",
	"please", "can", "could", "would", "will", "call", "talk", "give", "send", "also", "maybe")

var conjunctions = set("and", "but", "so", "then", "plus")

// clauses splits a sentence into [start, end) ranges: at ";", and before a
// comma or a conjunction that a clause starter follows ("..., and let's
// talk", "... by Friday and we can ..."). "Chicago to Dallas, Memphis to
// Atlanta" and "Tuesday, between 8 and 10" stay whole.
func clauses(s []token) [][2]int {
	var out [][2]int
	start := 0
	cut := func(i, next int) {
		if i > start {
			out = append(out, [2]int{start, i})
		}
		start = next
	}
	starts := func(j int) bool {
		for j < len(s) && (conjunctions[s[j].low] || s[j].low == "also") {
			j++
		}
		return j < len(s) && clauseStarters[s[j].low]
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i].low == ";":
			cut(i, i+1)
		case s[i].low == "," && starts(i+1):
			cut(i, i+1)
		case conjunctions[s[i].low] && i > start && s[i-1].low != "," && starts(i+1):
			cut(i, i)
		}
	}
	cut(len(s), len(s))
	return out
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
