// Package scrub removes credentials from text that leaves callscribe: vendor
// and CRM messages, network errors. The vendor-HTTP shell
// (internal/vendorhttp) redacts with it for the speech-vendor adapters
// (jobs/stt) and the CRM connectors (crm/connector), so that both redact the
// same way.
//
// It also makes text safe to store and print: Printable escapes control
// characters visibly (an ESC from a vendor never reaches a terminal), and
// Raw caps a raw vendor value such as a Retry-After at RawMaxBytes, saying
// so when it cut.
package scrub

import (
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Redacted replaces a secret.
const Redacted = "[redacted]"

// Scrubber knows some secrets (keys, tokens, presigned URLs) and, not
// knowing every other one, also strips the query string, fragment and user
// info from anything that looks like a URL.
type Scrubber struct {
	secrets []string // longest first
}

// New returns a Scrubber for secrets; values shorter than 3 bytes are
// ignored (replacing them would mangle ordinary text).
func New(secrets ...string) Scrubber {
	var keep []string
	for _, s := range secrets {
		if len(s) >= 3 {
			keep = append(keep, s)
		}
	}
	sort.Slice(keep, func(i, j int) bool { return len(keep[i]) > len(keep[j]) })
	return Scrubber{secrets: keep}
}

// Text returns msg without the known secrets and without URL queries and
// user info.
func (s Scrubber) Text(msg string) string {
	for _, secret := range s.secrets {
		msg = strings.ReplaceAll(msg, secret, Redacted)
	}
	return URLs(msg)
}

// Message returns msg scrubbed, as valid UTF-8, its runs of white space
// folded to one space, at most maxBytes long (cut at a character boundary).
func (s Scrubber) Message(msg string, maxBytes int) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.Join(strings.Fields(s.Text(msg)), " ")
	return TruncateUTF8(msg, maxBytes)
}

// urlPattern matches anything shaped like an absolute URL.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>\\` + "`" + `]+`)

// URLs strips the user info, query and fragment of every URL in s.
func URLs(s string) string {
	return urlPattern.ReplaceAllStringFunc(s, func(u string) string {
		scheme, rest, _ := strings.Cut(u, "://")
		authEnd := strings.IndexAny(rest, "/?#")
		if authEnd < 0 {
			authEnd = len(rest)
		}
		if at := strings.LastIndexByte(rest[:authEnd], '@'); at >= 0 {
			rest = Redacted + "@" + rest[at+1:]
		}
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest = rest[:i] + "?" + Redacted
		}
		return scheme + "://" + rest
	})
}

// TruncateUTF8 cuts s to at most n bytes without splitting a character.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
