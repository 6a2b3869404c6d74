package capacity

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// WarnIntervalDefault is how often, at most, a fail-open warning is logged.
const WarnIntervalDefault = time.Minute

// failOpen is what capacity code does when Redis cannot be reached: the
// caller goes ahead uncounted, a counter goes up, and a warning is logged
// at most once per interval. Capacity code never returns an error into a
// call.
type failOpen struct {
	logger   *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	lastWarn time.Time
	// Uncounted counts operations granted without Redis.
	uncounted atomic.Int64
	// suppressed counts warnings not logged since the last one.
	suppressed int64
}

func newFailOpen(logger *slog.Logger, interval time.Duration, now func() time.Time) *failOpen {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = WarnIntervalDefault
	}
	if now == nil {
		now = time.Now
	}
	return &failOpen{logger: logger, interval: interval, now: now}
}

// note records one operation that went ahead without Redis because of err.
func (f *failOpen) note(op string, err error) {
	f.uncounted.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
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
func (f *failOpen) Uncounted() int64 { return f.uncounted.Load() }
