package extract

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// The reference spelling of normalise and tokenize: every expression run
// on the whole text and on every word. normalise and tokenize skip an
// expression where it cannot match; TestTokenizeIsTheReference holds them
// to these.
func normaliseReference(s string) string {
	s = strings.ToValidUTF8(s, " ")
	s = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u00a0", " ", "&", " and ").Replace(s)
	s = rePO.ReplaceAllString(s, "PO ")
	s = reBOL.ReplaceAllString(s, "BOL ")
	s = reISODate.ReplaceAllString(s, "$1/$2/$3")
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

func tokenizeReference(text string) []token {
	rs := []rune(normaliseReference(text))
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
			if m := reHourAM.FindStringSubmatch(low); m != nil {
				emit(m[1])
				emit(strings.TrimSuffix(m[2], "m") + "m")
			} else if m := reRefGlue.FindStringSubmatch(low); m != nil {
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

// textPieces are the fragments every skipped expression looks for, in
// several cases, and the characters around them.
var textPieces = []string{
	"p.", "P.", "p. ", "o.", "O.", "b.", "B.", "l.", "L", "a.", "A.", "m", "M", "m.", "am", "pm", "a", "p",
	"PO4471", "po12", "bol7", "Pro3", "10am", "9p", "8:30pm", "12a", "bill of lading", "Bill  of Lading", "lading", "PO", "po", "bol", "pro", "4471", "10", "8:30", "12/3",
	"2026-12-03", "2026-1-3", "-", "–", "—", "...", "…", "\n", " ", "  ", "\t", ",", "!", "?", ";", ":", "'", "’", "‘",
	"\u00a0", "&", "İ", "ı", "K", "ſ", "x", "Tuesday", "St.", "\xff", "é",
}

// TestTokenizeIsTheReference checks that normalise and tokenize, which
// run their expressions only on a text or word that holds what every
// match holds, answer as the reference that runs them on everything, on
// texts built from the fragments those expressions look for.
func TestTokenizeIsTheReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(rapid.SampledFrom(textPieces), 0, 40).Draw(t, "parts")
		text := strings.Join(parts, "")
		if got, want := normalise(text), normaliseReference(text); got != want {
			t.Fatalf("normalise(%q) = %q, the reference %q", text, got, want)
		}
		if got, want := tokenize(text), tokenizeReference(text); !slices.Equal(got, want) {
			t.Fatalf("tokenize(%q) = %q, the reference %q", text, got, want)
		}
	})
}

// BenchmarkTokenize measures tokenize on a call's transcript.
func BenchmarkTokenize(b *testing.B) {
	text := strings.Repeat("Hi, this is Dana from Acme Freight about PO 4471. The pickup moved to Tuesday at 10am, "+
		"so please call the dock in Winston-Salem before 3 pm. Thanks! ", 4)
	for b.Loop() {
		_ = tokenize(text)
	}
}
