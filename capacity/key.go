package capacity

import "strings"

// KeyPrefixDefault prefixes every Redis key capacity uses.
const KeyPrefixDefault = "callscribe:cap"

// keyFor builds a key whose hash tag is tag: every key of one script uses
// the same tag, so each script's keys live in one Redis Cluster slot.
func keyFor(prefix, tag string, parts ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(tag)
	b.WriteString("}")
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}
