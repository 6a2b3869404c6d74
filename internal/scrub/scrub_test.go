package scrub_test

import (
	"strings"
	"testing"

	"github.com/callscribe/callscribe/internal/scrub"
)

func TestScrubber(t *testing.T) {
	t.Parallel()
	s := scrub.New("sk-secret-key", "ab")
	got := s.Text("key sk-secret-key at https://user:pw@host/p?sig=abc#x and ab")
	for _, leak := range []string{"sk-secret-key", "pw@", "sig=abc"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q leaks %q", got, leak)
		}
	}
	if !strings.HasSuffix(got, " ab") {
		t.Errorf("a 2-byte secret must not be replaced (it would mangle text): %q", got)
	}
	if m := s.Message("a\n\n  b \xff"+strings.Repeat("é", 10), 8); m != "a b \uFFFD" && len(m) > 8 {
		t.Errorf("Message = %q", m)
	}
	if got := scrub.TruncateUTF8("éé", 3); got != "é" {
		t.Errorf("TruncateUTF8 cut a character: %q", got)
	}
}
