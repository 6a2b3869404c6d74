// Package idtext checks the free-text ids a client sends (a recording's
// call id, a tenant id, a lease's holder, ...) for characters that change
// how text is shown rather than what it says: control characters
// (Unicode category Cc: NUL, newline, DEL, the C1 controls), format
// characters (Cf: zero-width characters such as U+200B, the byte-order
// mark U+FEFF, and every bidirectional control: U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators
// (U+2028, U+2029). An id carrying them can look like another id on a
// screen, in a log or in a CRM ("abc‮fed" shows as "abcdef"), so they
// are refused rather than stored.
//
// It imports no package of callscribe.
package idtext

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Problem returns why s may not be an id, naming the byte offset of the
// first offending character, or "" when s is valid UTF-8 without control,
// format or separator characters. It says nothing about length or
// emptiness: callers have their own rules for those.
func Problem(s string) string {
	for i, c := range s {
		switch {
		case c == utf8.RuneError && !validAt(s, i):
			return fmt.Sprintf("not valid UTF-8 at byte %d", i)
		case unicode.Is(unicode.Cc, c):
			return fmt.Sprintf("control character %U at byte %d", c, i)
		case unicode.Is(unicode.Cf, c):
			return fmt.Sprintf("invisible format or bidirectional control character %U at byte %d", c, i)
		case unicode.Is(unicode.Zl, c), unicode.Is(unicode.Zp, c):
			return fmt.Sprintf("line or paragraph separator %U at byte %d", c, i)
		}
	}
	return ""
}

// validAt reports whether the U+FFFD at byte i of s is encoded there (a
// real replacement character) rather than standing for invalid bytes.
func validAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}
