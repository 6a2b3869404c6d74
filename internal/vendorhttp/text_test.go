package vendorhttp

import (
	"net/http"
	"strings"
	"testing"
)

func TestPlainText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body, want string
	}{
		{"text/plain", "text/plain", "quota exceeded", "quota exceeded"},
		{"with charset", "text/plain; charset=utf-8", "bad key", "bad key"},
		{"upper case", "Text/Plain", "bad key", "bad key"},
		{"json", "application/json", `{"error": "x"}`, ""},
		{"html", "text/html", "<h1>502</h1>", ""},
		{"no content type", "", "bad key", ""},
		{"malformed content type", "text/plain; ;", "bad key", ""},
		{"control characters", "text/plain", "red\x1b[31m alert\x00\x07\x7f\u009b!", "red[31m alert!"},
		{"white space kept", "text/plain", "line one\r\n\tline two", "line one\r\n\tline two"},
		{"invalid UTF-8", "text/plain", "bad \xff byte", "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.contentType != "" {
				h.Set("Content-Type", tt.contentType)
			}
			if got := PlainText(Reply{Status: 500, Header: h, Body: []byte(tt.body)}); got != tt.want {
				t.Errorf("PlainText = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRawHeader(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	if got := RawHeader(h, "Retry-After"); got != nil {
		t.Errorf("absent header: %q, want nil", *got)
	}
	h.Add("Retry-After", "")
	if got := RawHeader(h, "Retry-After"); got == nil || *got != "" {
		t.Errorf("empty header: %v, want a pointer to \"\"", got)
	}
	h = http.Header{}
	h.Add("Retry-After", " 120 ")
	h.Add("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")
	if got := RawHeader(h, "retry-after"); got == nil || *got != " 120 , Wed, 21 Oct 2015 07:28:00 GMT" {
		t.Errorf("two fields: %v, want them joined exactly as received", got)
	}
	// A vendor's 60,000-byte header is stored and logged cut, and says so.
	h = http.Header{}
	h.Add("Retry-After", strings.Repeat("1", 60000))
	got := RawHeader(h, "Retry-After")
	if got == nil || len(*got) > 300 || !strings.HasSuffix(*got, "…(truncated, 60000 bytes)") {
		t.Errorf("60,000-byte header: %d bytes, want at most 300 ending in the truncation note", len(*got))
	}
	h = http.Header{}
	h.Add("Retry-After", "5\x1b]0;owned\x07")
	if got := RawHeader(h, "Retry-After"); got == nil || *got != `5\x1b]0;owned\x07` {
		t.Errorf("control characters: %v, want them escaped", got)
	}
}

func TestRedactorMessage(t *testing.T) {
	t.Parallel()
	r := NewRedactor(60, "sk-live-secret", "ab")
	tests := []struct{ name, in, want string }{
		{"secret", "key sk-live-secret refused", "key " + Redacted + " refused"},
		{"short secret ignored", "ab cd", "ab cd"},
		{"url query and user info", "GET https://u:p@x.test/a?sig=1 failed", "GET https://" + Redacted + "@x.test/a?" + Redacted + " failed"},
		{"white space folded", "  a\r\n\t b  ", "a b"},
		{"control characters", "a\x00b\x1bc\u009bd", "abcd"},
		{"capped at a character boundary", strings.Repeat("é", 40), strings.Repeat("é", 30)},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		if got := r.Message(tt.in); got != tt.want {
			t.Errorf("%s: Message(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
	if got := r.Text("token sk-live-secret  kept  "); got != "token "+Redacted+"  kept  " {
		t.Errorf("Text = %q: want the secret removed and nothing else changed", got)
	}
}
