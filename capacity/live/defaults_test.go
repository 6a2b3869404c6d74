package live_test

import (
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
)

// The live-call defaults are the ones the capacity design gives, as the
// configs' WithDefaults apply them to a zero config: a heartbeat every
// 20s, a dial re-check every 10s, a voice wait of 1.5s, a gate timeout of
// 4s, and an idle organisation's slot sets kept an hour.
func TestLiveDefaultsAreTheDesigns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"capacity.Config.HeartbeatEvery", capacity.Config{}.WithDefaults().HeartbeatEvery, 20 * time.Second},
		{"live.DialerConfig.Recheck", live.DialerConfig{}.WithDefaults().Recheck, 10 * time.Second},
		{"live.VoiceOptions.Wait", live.VoiceOptions{}.WithDefaults().Wait, 1500 * time.Millisecond},
		{"live.GateConfig.Timeout", live.GateConfig{}.WithDefaults().Timeout, 4 * time.Second},
		{"capacity.SlotSetIdleTTL", capacity.SlotSetIdleTTL, time.Hour},
	} {
		if c.got != c.want {
			t.Errorf("%s defaults to %s, want %s", c.name, c.got, c.want)
		}
	}
}
