package capacity

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/clock"
)

// RedisConfig configures NewRedis: what every capacity counter shares.
type RedisConfig struct {
	// Client is the Redis client. Either Client or URL is required; a
	// Client is the caller's to close.
	Client redis.UniversalClient
	// URL, when Client is nil, is a redis:// or unix:// URL: NewRedis
	// dials it with options that make a dead Redis cost milliseconds
	// rather than seconds (no retries, one dial attempt, dial and socket
	// timeouts of OpTimeout, context deadlines honoured), and Close closes
	// that client.
	URL string
	// KeyPrefix prefixes every key. Default "": KeyPrefixDefault.
	KeyPrefix string
	// OpTimeout bounds each Redis round trip of the vendor leases, the
	// windows and capacity/live's dial queue and timelines; past it a call
	// fails open. Default 0: OpTimeoutDefault (250ms).
	OpTimeout time.Duration
	// AdmitOpTimeout bounds each Redis round trip of the counters a call
	// waits on before it starts: Slots, CallerIDs and capacity/live's
	// RateLimiter. Default 0: AdmitOpTimeoutDefault (1s).
	AdmitOpTimeout time.Duration
	// Logger receives the fail-open warnings and the counters' logs.
	// Default nil: discard.
	Logger *slog.Logger
	// WarnInterval is how often, at most, a counter logs a fail-open
	// warning. Default 0: WarnIntervalDefault (1m).
	WarnInterval time.Duration
	// Clock is the local clock, used only to rate-limit warnings and to
	// stamp uncounted grants; lease expiry and every shared time are
	// Redis's. Default nil: clock.System.
	Clock clock.Clock
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c RedisConfig) WithDefaults() RedisConfig {
	c.KeyPrefix = cmp.Or(c.KeyPrefix, KeyPrefixDefault)
	c.OpTimeout = cmp.Or(c.OpTimeout, OpTimeoutDefault)
	c.AdmitOpTimeout = cmp.Or(c.AdmitOpTimeout, AdmitOpTimeoutDefault)
	c.WarnInterval = cmp.Or(c.WarnInterval, WarnIntervalDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.Clock = cmp.Or[clock.Clock](c.Clock, clock.System{})
	return c
}

// Validate returns every field c gets wrong, each error naming the field,
// such as "OpTimeout: must be > 0". Run it on WithDefaults' result.
func (c RedisConfig) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, a...)...))
	}
	switch {
	case c.Client == nil && c.URL == "":
		bad("Client", "is required (or URL)")
	case c.Client != nil && c.URL != "":
		bad("URL", "must be empty when Client is set")
	}
	if c.KeyPrefix == "" {
		bad("KeyPrefix", "is required")
	}
	for field, d := range map[string]time.Duration{"OpTimeout": c.OpTimeout, "AdmitOpTimeout": c.AdmitOpTimeout, "WarnInterval": c.WarnInterval} {
		if d <= 0 {
			bad(field, "must be > 0, got %s", d)
		}
	}
	if c.Logger == nil {
		bad("Logger", "is required")
	}
	if c.Clock == nil {
		bad("Clock", "is required")
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Redis is the one Redis handle every capacity counter is built on:
// Leases, Slots, CallerIDs, Windows, and capacity/live's Dialer, Timeline
// and RateLimiter. It holds the client, the key prefix, the round-trip
// bounds and what fail-open warnings need; each counter keeps its own
// fail-open count. Build it once per process with NewRedis. It is safe for
// concurrent use.
type Redis struct {
	kit   rediskit.Kit
	owned bool // the client was dialled from RedisConfig.URL: Close closes it
}

// NewRedis returns the handle of cfg after filling defaults, or an error
// naming each field cfg gets wrong.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("capacity: RedisConfig: %w", err)
	}
	r := &Redis{kit: rediskit.Kit{Client: cfg.Client, Prefix: cfg.KeyPrefix, Timeout: cfg.OpTimeout,
		AdmitTimeout: cfg.AdmitOpTimeout, Logger: cfg.Logger, WarnInterval: cfg.WarnInterval, Clock: cfg.Clock}}
	if cfg.Client == nil {
		opt, err := rediskit.FailFastOptions(cfg.URL, cfg.OpTimeout)
		if err != nil {
			return nil, err
		}
		r.kit.Client, r.owned = redis.NewClient(opt), true
	}
	return r, nil
}

// Client returns the Redis client (for a readiness probe, say).
func (r *Redis) Client() redis.UniversalClient { return r.kit.Client }

// KeyPrefix returns the prefix of every key.
func (r *Redis) KeyPrefix() string { return r.kit.Prefix }

// Close closes the client NewRedis dialled from RedisConfig.URL; a client
// given as RedisConfig.Client is left to its owner.
func (r *Redis) Close() error {
	if !r.owned {
		return nil
	}
	return r.kit.Client.Close()
}

// Kit returns the plumbing of the handle for capacity's sub-packages
// (capacity/live, capacity/httpapi), which read it through
// capacity/internal/rediskit.
func (r *Redis) Kit() rediskit.Kit { return r.kit }

// LogRedisClient routes go-redis's own messages (a line per failed dial
// during an outage) to logger at warn level, at most one per
// WarnIntervalDefault with a count of the rest, like the fail-open
// warnings. go-redis has one logger per process: the last call wins.
func LogRedisClient(logger *slog.Logger) {
	rediskit.NewRedisLog(logger, WarnIntervalDefault, nil).Install()
}
