package scrub_test

import (
	"strings"
	"testing"

	"github.com/callscribe/callscribe/internal/scrub"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain text, é", "plain text, é"},
		{"red\x1b[31m alert", `red\x1b[31m alert`},
		{"a\tb\r\nc\x00\x7f", `a\x09b\x0d\x0ac\x00\x7f`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"bad \xff byte", `bad \xff byte`},
		{`back\slash`, `back\slash`},
	}
	for _, tt := range tests {
		if got := scrub.Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRaw(t *testing.T) {
	t.Parallel()
	if got := scrub.Raw(" 120 "); got != " 120 " {
		t.Errorf("Raw changed a short value: %q", got)
	}
	if got := scrub.Raw("5\x1b[2J"); got != `5\x1b[2J` {
		t.Errorf("Raw kept a control character: %q", got)
	}
	exact := strings.Repeat("9", scrub.RawMaxBytes)
	if got := scrub.Raw(exact); got != exact {
		t.Errorf("Raw cut a value of exactly RawMaxBytes")
	}
	got := scrub.Raw(strings.Repeat("é", 30000)) // 60,000 bytes
	if len(got) > scrub.RawMaxBytes+40 {
		t.Errorf("Raw of 60,000 bytes is %d bytes long", len(got))
	}
	if !strings.HasSuffix(got, scrub.TruncatedMarker+"60000 bytes)") {
		t.Errorf("Raw of 60,000 bytes does not say it was cut: ...%q", got[len(got)-40:])
	}
	if !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("Raw cut inside a character: %q", got)
	}
}
