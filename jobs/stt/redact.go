package stt

import (
	"net/url"

	"github.com/callscribe/callscribe/internal/scrub"
)

// scrubber removes credentials from text that leaves the adapter: vendor
// messages and error strings. It knows the API key and the request's audio
// URL (with its query and user info, raw and unescaped), and strips query
// strings and user info from anything shaped like a URL (a vendor may echo
// a presigned URL in its own encoding).
type scrubber struct{ s scrub.Scrubber }

// newScrubber returns a scrubber for the API key and the audio URL.
func newScrubber(apiKey, audioURL string) scrubber {
	secrets := []string{apiKey, audioURL}
	if u, err := url.Parse(audioURL); err == nil {
		secrets = append(secrets, u.RawQuery)
		if q, err := url.QueryUnescape(u.RawQuery); err == nil {
			secrets = append(secrets, q)
		}
		if u.User != nil {
			secrets = append(secrets, u.User.String())
			if p, ok := u.User.Password(); ok {
				secrets = append(secrets, p)
			}
		}
	}
	return scrubber{scrub.New(secrets...)}
}

// text returns s without the known secrets and URL queries.
func (s scrubber) text(msg string) string { return s.s.Text(msg) }

// message returns msg as a Response.Message (scrubbed, folded, at most
// MessageMaxBytes).
func (s scrubber) message(msg string) string { return s.s.Message(msg, MessageMaxBytes) }

func scrubURLs(s string) string { return scrub.URLs(s) }
