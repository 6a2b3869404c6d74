package capacity

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// WarnIntervalDefault is how often, at most, a fail-open warning is logged.
const WarnIntervalDefault = time.Minute

// FailOpen is what capacity code does when Redis cannot be reached: the
// caller goes ahead uncounted, a counter goes up, and a warning is logged
// at most once per interval. Capacity code never returns an error into a
// call. Leases and Slots keep one each; a counter built on capacity (such
// as capacity/live's RateLimiter) keeps its own. It is safe for concurrent
// use.
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

// NewFailOpen returns a FailOpen warning to logger (nil: discard) at most
// once per interval (0 or negative: WarnIntervalDefault), reading the time
// from c (nil: clock.System).
func NewFailOpen(logger *slog.Logger, interval time.Duration, c clock.Clock) *FailOpen {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = WarnIntervalDefault
	}
	if c == nil {
		c = clock.System{}
	}
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
