package stt

import (
	"net/url"

	"github.com/callscribe/callscribe/internal/scrub"
	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// scrubber removes credentials from text that leaves the adapter: vendor
// messages and error strings. It knows the API key and the request's audio
// URL (with its query and user info, raw and unescaped), and strips query
// strings and user info from anything shaped like a URL (a vendor may echo
// a presigned URL in its own encoding). Its Message is at most
// MessageMaxBytes.
type scrubber = vendorhttp.Redactor

// newScrubber returns a scrubber for the API key and the audio URL.
func newScrubber(apiKey string, audioURLs ...string) scrubber {
	secrets := []string{apiKey}
	for _, audioURL := range audioURLs {
		secrets = append(secrets, audioURL)
		u, err := url.Parse(audioURL)
		if err != nil {
			continue
		}
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
	return vendorhttp.NewRedactor(MessageMaxBytes, secrets...)
}

func scrubURLs(s string) string { return scrub.URLs(s) }
