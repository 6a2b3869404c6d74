package idtext_test

import (
	"strings"
	"testing"

	"github.com/callscribe/callscribe/internal/idtext"
)

func TestProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
	}{
		{"call-1", ""},
		{"Jürgen/Zoë 42 — ok", ""},
		{"呼叫-7", ""},
		{"\uFFFD", ""}, // an encoded replacement character is text
		{"ab\u202Efed", "U+202E at byte 2"},
		{"a\u200Bb", "U+200B at byte 1"},
		{"x\u2066y\u2069", "U+2066 at byte 1"},
		{"\uFEFFcall", "U+FEFF at byte 0"},
		{"c\u061Cd", "U+061C at byte 1"},
		{"c\u200Ed", "U+200E at byte 1"},
		{"line\nbreak", "control character U+000A at byte 4"},
		{"nul\x00", "U+0000 at byte 3"},
		{"del\x7f", "U+007F at byte 3"},
		{"c1\u0085", "U+0085 at byte 2"},
		{"sep\u2028", "separator U+2028 at byte 3"},
		{"bad\xffutf8", "not valid UTF-8 at byte 3"},
	} {
		got := idtext.Problem(tc.in)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Problem(%+q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
