package connector

import (
	"net/url"
	"unicode/utf8"

	"github.com/callscribe/callscribe/internal/scrub"
	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// redacted replaces a secret in a message.
const redacted = vendorhttp.Redacted

// scrubber removes credentials from text that leaves the target: CRM
// messages and network errors. It knows the token (raw and URL-escaped)
// and strips query strings and user info from anything shaped like a URL.
// Its Message is at most MessageMaxBytes.
type scrubber = vendorhttp.Redactor

// newScrubber returns a scrubber for the token.
func newScrubber(token string) scrubber {
	return vendorhttp.NewRedactor(MessageMaxBytes, token, url.QueryEscape(token), url.PathEscape(token))
}

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
