package rediskit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/scrub"
)

// RedisLog is a logger for go-redis's own messages (redis.SetLogger):
// during a Redis outage go-redis reports every failed dial, which would
// drown the once-per-interval fail-open warning (FailOpen). RedisLog
// passes at most one message per interval to its slog.Logger, at warn
// level, with the count of those it held back since the last one; the
// rest are only counted. It is safe for concurrent use.
type RedisLog struct {
	logger   *slog.Logger
	interval time.Duration
	clock    clock.Clock

	mu         sync.Mutex
	last       time.Time
	suppressed int64 // since the last message logged
	total      int64 // every message, logged or not
}

// NewRedisLog returns a RedisLog writing to logger (nil: discard) at most
// once per interval, reading the time from c (nil: clock.System).
func NewRedisLog(logger *slog.Logger, interval time.Duration, c clock.Clock) *RedisLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if c == nil {
		c = clock.System{}
	}
	return &RedisLog{logger: logger, interval: interval, clock: c}
}

// Install makes l go-redis's logger, for every client in the process
// (go-redis has one logger per process).
func (l *RedisLog) Install() { redis.SetLogger(l) }

// Printf is go-redis's logging call: the message is logged if none was in
// the last interval, else counted.
func (l *RedisLog) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	now := l.clock.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		return
	}
	msg := scrub.TruncateUTF8(scrub.Printable(fmt.Sprintf(format, v...)), 1024)
	l.logger.WarnContext(ctx, "redis client", slog.String("message", msg),
		slog.Int64("suppressed_since_last", l.suppressed), slog.Int64("messages_total", l.total))
	l.last, l.suppressed = now, 0
}

// Total returns how many messages go-redis gave l, logged or not.
func (l *RedisLog) Total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
