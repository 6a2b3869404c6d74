package live

import "time"

// WithDialTestTick returns cfg with the Dialer's re-check ticker replaced
// by tick. Test builds only.
func WithDialTestTick(cfg DialerConfig, tick <-chan time.Time) DialerConfig {
	cfg.tick = tick
	return cfg
}
