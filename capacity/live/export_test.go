package live

import "time"

// WithDialTestTick returns cfg with the Dialer's re-check ticker replaced
// by tick. Test builds only.
func WithDialTestTick(cfg DialerConfig, tick <-chan time.Time) DialerConfig {
	cfg.tick = tick
	return cfg
}

// WithRateTestNow returns cfg with the start rate script's clock replaced
// by now (Unix milliseconds) instead of Redis TIME, so tests can move
// time deterministically. Test builds only.
func WithRateTestNow(cfg RateLimiterConfig, now func() int64) RateLimiterConfig {
	cfg.testNow = now
	return cfg
}

// WithRateTestGranted returns cfg with granted told the Redis time (Unix
// microseconds) of every counted start. Test builds only.
func WithRateTestGranted(cfg RateLimiterConfig, granted func(org, campaign string, atUs int64)) RateLimiterConfig {
	cfg.granted = granted
	return cfg
}

// DialReserveScriptHash is the SHA1 of the script that stores a call's
// reservation, for tests that fail its round trips. Test builds only.
func DialReserveScriptHash() string { return dialReserveScript.Hash() }

// DialAnswerScriptHash is the SHA1 of the script that answers a reserved
// call. Test builds only.
func DialAnswerScriptHash() string { return dialAnswerScript.Hash() }
