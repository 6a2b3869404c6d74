package rediskit

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// FailOpen is what capacity code does when Redis cannot be reached: the
// caller goes ahead uncounted, a counter goes up, and a warning is logged
// at most once per interval. Capacity code never returns an error into a
// call. Each counter (Leases, Slots, capacity/live's RateLimiter…) keeps
// its own, made by Kit.NewFailOpen. It is safe for concurrent use.
type FailOpen struct {
	logger   *slog.Logger
	interval time.Duration
	clock    clock.Clock

	mu       sync.Mutex
	lastWarn time.Time
	// Uncounted counts operations granted without Redis.
	uncounted atomic.Int64
	// suppressed counts warnings not logged since the last one.
	suppressed int64
}

// NewFailOpen returns a FailOpen warning to logger at most once per
// interval, reading the time from c. None may be nil or zero: Kit's
// owner (capacity.NewRedis) fills them in.
func NewFailOpen(logger *slog.Logger, interval time.Duration, c clock.Clock) *FailOpen {
	return &FailOpen{logger: logger, interval: interval, clock: c}
}

// Note records one operation, named op, that went ahead without Redis
// because of err.
func (f *FailOpen) Note(op string, err error) {
	f.uncounted.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	if !f.lastWarn.IsZero() && now.Sub(f.lastWarn) < f.interval {
		f.suppressed++
		return
	}
	f.logger.Warn("capacity: Redis unreachable; going ahead uncounted (fail open)",
		slog.String("op", op), slog.String("error", err.Error()), slog.Int64("suppressed_since_last_warning", f.suppressed),
		slog.Int64("uncounted_total", f.uncounted.Load()))
	f.lastWarn, f.suppressed = now, 0
}

// Uncounted returns how many operations went ahead without Redis.
func (f *FailOpen) Uncounted() int64 { return f.uncounted.Load() }
