package connector

import (
	"net/url"
	"unicode/utf8"

	"github.com/callscribe/callscribe/internal/scrub"
)

// redacted replaces a secret in a message.
const redacted = scrub.Redacted

// scrubber removes credentials from text that leaves the target: CRM
// messages and network errors. It knows the token (raw and URL-escaped)
// and strips query strings and user info from anything shaped like a URL.
type scrubber struct{ s scrub.Scrubber }

// newScrubber returns a scrubber for the token.
func newScrubber(token string) scrubber {
	return scrubber{scrub.New(token, url.QueryEscape(token), url.PathEscape(token))}
}

// message returns msg as a Result.Message (scrubbed, folded, at most
// MessageMaxBytes).
func (s scrubber) message(msg string) string { return s.s.Message(msg, MessageMaxBytes) }

func scrubURLs(s string) string { return scrub.URLs(s) }

func truncateUTF8(s string, n int) string { return scrub.TruncateUTF8(s, n) }

// truncateRunes cuts s to at most n characters.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
