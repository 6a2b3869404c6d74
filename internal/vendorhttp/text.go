package vendorhttp

import (
	"mime"
	"net/http"
	"strings"
	"unicode"

	"github.com/callscribe/callscribe/internal/scrub"
)

// Redacted replaces a secret in a message.
const Redacted = scrub.Redacted

// Redactor removes credentials from text that leaves an adapter: vendor
// messages and network errors. It knows some secrets (keys, tokens,
// presigned URLs) and strips the query and user info of anything shaped
// like a URL.
type Redactor struct {
	s        scrub.Scrubber
	maxBytes int
}

// NewRedactor returns a Redactor whose messages are at most maxBytes
// long, for the given secrets (values shorter than 3 bytes are ignored).
func NewRedactor(maxBytes int, secrets ...string) Redactor {
	return Redactor{s: scrub.New(secrets...), maxBytes: maxBytes}
}

// Text returns s without the known secrets and URL queries and user info.
func (r Redactor) Text(s string) string { return r.s.Text(s) }

// Message returns msg as a message to store or print: control characters
// removed, scrubbed, valid UTF-8, its runs of white space folded to one
// space, at most the Redactor's maxBytes (cut at a character boundary).
func (r Redactor) Message(msg string) string {
	return r.s.Message(stripControl(msg), r.maxBytes)
}

// RawHeaderMaxBytes bounds what RawHeader returns (scrub.RawMaxBytes),
// before the truncation note.
const RawHeaderMaxBytes = scrub.RawMaxBytes

// RawHeader returns the named header as received, several fields joined
// with ", ", or nil when absent. It is what the adapters store and log, so
// it is bounded (scrub.Raw): control characters are escaped visibly (\x1b)
// and a value over RawHeaderMaxBytes is cut and ends with
// "…(truncated, N bytes)", N the length received; such a value does not
// parse as a delay. Ordinary values are returned exactly as received.
func RawHeader(h http.Header, name string) *string {
	vs := h.Values(name)
	if len(vs) == 0 {
		return nil
	}
	s := scrub.Raw(strings.Join(vs, ", "))
	return &s
}

// PlainText returns the body when the server said it is text/plain (the
// message of a vendor, CRM or proxy that answers errors without JSON), as
// valid UTF-8 without control characters other than white space; "" for
// any other content type. The body is already capped by Endpoint.MaxBody;
// pass the result through a Redactor's Message before storing it.
func PlainText(rep Reply) string {
	mt, _, err := mime.ParseMediaType(rep.Header.Get("Content-Type"))
	if err != nil || mt != "text/plain" {
		return ""
	}
	return stripControl(string(rep.Body))
}

// stripControl returns s as valid UTF-8 with its control characters
// removed, white space (tab, line breaks) kept.
func stripControl(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsFunc(s, isStrippedControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isStrippedControl(r) {
			return -1
		}
		return r
	}, s)
}

func isStrippedControl(r rune) bool { return unicode.IsControl(r) && !unicode.IsSpace(r) }
