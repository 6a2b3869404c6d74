// Package rediskit is the Redis plumbing that capacity and its
// sub-packages share: the Kit every counter is built on (client, key
// prefix, round-trip bound, fail-open warnings), key building (Key), the
// shared "now" script prelude (NowScript), the fail-open counter
// (FailOpen) and go-redis's rate-limited logger (RedisLog). capacity.Redis
// owns the defaults; nothing here fills one in.
package rediskit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/clock"
)

// Kit is what a capacity counter needs of Redis, filled in by
// capacity.NewRedis: the client, the key prefix, the bound of one round
// trip and what a fail-open warning needs. It is a value: a counter keeps
// its own copy.
type Kit struct {
	Client redis.UniversalClient
	// Prefix prefixes every key (Key).
	Prefix string
	// Timeout bounds each Redis round trip (Op).
	Timeout time.Duration
	// AdmitTimeout is Timeout for the admission counters (call slots,
	// caller IDs, call starts): see Admission.
	AdmitTimeout time.Duration
	// Logger receives the fail-open warnings and the counters' own logs.
	Logger *slog.Logger
	// WarnInterval is the least time between two fail-open warnings.
	WarnInterval time.Duration
	// Clock rate-limits warnings and stamps uncounted grants; times that
	// processes share are Redis's (NowScript).
	Clock clock.Clock
}

// Admission returns k bounding each round trip by AdmitTimeout: the
// counters a call waits on before it starts.
func (k Kit) Admission() Kit {
	k.Timeout = k.AdmitTimeout
	return k
}

// Key is Key under k's prefix.
func (k Kit) Key(tag string, parts ...string) string { return Key(k.Prefix, tag, parts...) }

// Op is the context of one Redis round trip: ctx with a deadline Timeout
// away. Call its cancel when the round trip is done. A caller whose round
// trip must outlive ctx's cancellation (a release, a fail-open grant)
// passes context.WithoutCancel(ctx), or uses Detached.
func (k Kit) Op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.Timeout)
}

// Detached is Op on ctx's values without its cancellation: the round trip
// still gets a definite answer after the caller gave up, within Timeout.
func (k Kit) Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return k.Op(context.WithoutCancel(ctx))
}

// NewFailOpen returns a FailOpen counter warning through k's logger.
func (k Kit) NewFailOpen() *FailOpen { return NewFailOpen(k.Logger, k.WarnInterval, k.Clock) }

// FailFastOptions parses a redis:// or unix:// URL into client options that
// make an unreachable Redis cost at most timeout: no command retries, one
// dial attempt, dial and socket timeouts of timeout, context deadlines
// honoured.
func FailFastOptions(url string, timeout time.Duration) (*redis.Options, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("capacity: parsing Redis URL: %w", err)
	}
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DialTimeout = timeout
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.ContextTimeoutEnabled = true
	return opt, nil
}
