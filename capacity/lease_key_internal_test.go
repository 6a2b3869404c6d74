package capacity

import (
	"strings"
	"testing"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// Every key one script touches carries the same hash tag, "provider/kind",
// so the script's keys live in one Redis Cluster slot.
func TestLeaseKeysShareHashTag(t *testing.T) {
	t.Parallel()
	l := &Leases{kit: rediskit.Kit{Prefix: "p"}}
	tag := l.tag("deep:gram", KindSTT)
	for _, key := range []string{l.leasesKey(tag), l.limitKey(tag), l.peakKey(tag), l.eventsKey(tag)} {
		open, closing := strings.Index(key, "{"), strings.Index(key, "}")
		if open < 0 || closing < open || key[open+1:closing] != "deep:gram/stt" {
			t.Errorf("key %q: hash tag is not %q", key, tag)
		}
	}
}
