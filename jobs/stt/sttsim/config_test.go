package sttsim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	if len(c.APIKeys) != 1 || c.APIKeys[0] != APIKeyDefault || c.Cooldown != CooldownDefault ||
		c.RetryAfterForm != FormSeconds || c.MaxAudioBytes != MaxAudioBytesDefault ||
		c.InFlightRetryAfter != InFlightRetryAfterDefault || c.MaxInFlight != 0 ||
		c.Clock == nil || c.Rand == nil || c.Logger == nil || c.Transcribe == nil {
		t.Errorf("defaults %+v", c)
	}
	if _, ok := c.Clock.(clock.System); !ok {
		t.Errorf("default clock is %T, want clock.System", c.Clock)
	}
	// The system clock keeps time.Now's zone; the server stamps in UTC.
	sim, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if now := sim.now(); now.Location() != time.UTC || time.Since(now) > time.Minute {
		t.Errorf("default clock says %v", now)
	}
	kept := Config{APIKeys: []string{"a"}, Cooldown: time.Minute, RetryAfterForm: FormMixed, MaxAudioBytes: 10,
		MaxInFlight: 4, InFlightRetryAfter: 5 * time.Second}.WithDefaults()
	if kept.APIKeys[0] != "a" || kept.Cooldown != time.Minute || kept.RetryAfterForm != FormMixed || kept.MaxAudioBytes != 10 ||
		kept.MaxInFlight != 4 || kept.InFlightRetryAfter != 5*time.Second {
		t.Errorf("set fields were overwritten: %+v", kept)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		field string
		cfg   Config
	}{
		{"APIKeys[1]", Config{APIKeys: []string{"a", ""}}},
		{"Models[0]", Config{Models: []string{""}}},
		{"RateLimitShare", Config{RateLimitShare: 1.5}},
		{"UnavailableShare", Config{UnavailableShare: -0.1}},
		{"ServerErrorShare", Config{ServerErrorShare: math.NaN()}},
		{"AsyncShare", Config{AsyncShare: 2}},
		{"DropAfterAcceptShare", Config{DropAfterAcceptShare: -1}},
		{"BatchItemFailShare", Config{BatchItemFailShare: 1.5}},
		{"BatchItemFailShare + BatchItemLoseShare", Config{BatchItemFailShare: 0.6, BatchItemLoseShare: 0.5}},
		{"Cooldown", Config{Cooldown: -time.Second}},
		{"Latency", Config{Latency: -1}},
		{"LatencyJitter", Config{LatencyJitter: -1}},
		{"ProcessingTime", Config{ProcessingTime: -1}},
		{"RetryAfterForm", Config{RetryAfterForm: "http-date"}},
		{"MaxAudioBytes", Config{MaxAudioBytes: -1}},
		{"MaxInFlight", Config{MaxInFlight: -1}},
		{"InFlightRetryAfter", Config{InFlightRetryAfter: -time.Second}},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), "Config."+c.field) {
			t.Errorf("%s: got %v, want an error naming Config.%s", c.field, err, c.field)
		}
	}
	if _, err := New(Config{RateLimitShare: 1, RetryAfterForm: FormMixed, Latency: time.Millisecond, MaxInFlight: 1}); err != nil {
		t.Errorf("a valid Config was refused: %v", err)
	}
}

func TestScopeString(t *testing.T) {
	t.Parallel()
	a := Scope{APIKey: "sk-live-0123456789", Model: "general"}.String()
	b := Scope{APIKey: "sk-live-0123456780", Model: "general"}.String()
	if a == b || strings.Contains(a, "0123") || !strings.HasPrefix(a, "sk-l…") || !strings.HasSuffix(a, "/general") {
		t.Errorf("scope strings %q and %q", a, b)
	}
	if s := (Scope{APIKey: "ab", Model: "m"}).String(); strings.Contains(s, "ab") {
		t.Errorf("short key revealed: %q", s)
	}
}
