package scrub

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// RawMaxBytes is how much of a raw vendor value (a Retry-After or a
// vendor's own delay header) callscribe keeps: the timing headers it
// reads are a few dozen bytes; anything longer is cut by Raw.
const RawMaxBytes = 256

// TruncatedMarker starts what Raw appends to a value it cut.
const TruncatedMarker = "…(truncated, "

// Raw returns a raw vendor value fit to store and log: its control
// characters escaped visibly (see Printable) and, when the result is over
// RawMaxBytes, cut at a character boundary and followed by
// "…(truncated, N bytes)", N being the length of s as received. A value
// without control characters and within the bound is returned unchanged.
func Raw(s string) string {
	n := len(s)
	s = Printable(s)
	if len(s) <= RawMaxBytes {
		return s
	}
	return TruncateUTF8(s, RawMaxBytes) + fmt.Sprintf("%s%d bytes)", TruncatedMarker, n)
}

// Printable returns s safe to print on a terminal or in a log line: each
// control character (C0, DEL, C1; tab and line breaks too) is written as
// an escape, \x1b for ESC, \u009b for a C1 control, and each invalid UTF-8
// byte as \xff. A backslash is kept as it is. Text without either is
// returned unchanged.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
