package target

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// redacted replaces a secret in a message.
const redacted = "[redacted]"

// scrubber removes credentials from text that leaves the target: CRM
// messages and network errors. It knows the token (raw and URL-escaped),
// and, not knowing every other secret, it also strips the query string,
// fragment and user info from anything that looks like a URL.
type scrubber struct {
	secrets []string // longest first
}

// newScrubber returns a scrubber for the token.
func newScrubber(token string) scrubber {
	var secrets []string
	for _, s := range []string{token, url.QueryEscape(token), url.PathEscape(token)} {
		if len(s) >= 3 {
			secrets = append(secrets, s)
		}
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	return scrubber{secrets: secrets}
}

// text returns msg without the known secrets and without URL queries and
// user info.
func (s scrubber) text(msg string) string {
	for _, secret := range s.secrets {
		msg = strings.ReplaceAll(msg, secret, redacted)
	}
	return scrubURLs(msg)
}

// message returns msg as a Result.Message: scrubbed, valid UTF-8, its runs
// of white space folded to one space, at most MessageMaxBytes long (cut at
// a character boundary).
func (s scrubber) message(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.Join(strings.Fields(s.text(msg)), " ")
	return truncateUTF8(msg, MessageMaxBytes)
}

// urlPattern matches anything shaped like an absolute URL.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>\\` + "`" + `]+`)

// scrubURLs strips the user info, query and fragment of every URL in s.
func scrubURLs(s string) string {
	return urlPattern.ReplaceAllStringFunc(s, func(u string) string {
		scheme, rest, _ := strings.Cut(u, "://")
		authEnd := strings.IndexAny(rest, "/?#")
		if authEnd < 0 {
			authEnd = len(rest)
		}
		if at := strings.LastIndexByte(rest[:authEnd], '@'); at >= 0 {
			rest = redacted + "@" + rest[at+1:]
		}
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest = rest[:i] + "?" + redacted
		}
		return scheme + "://" + rest
	})
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

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
