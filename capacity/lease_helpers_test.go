package capacity_test

import (
	"bytes"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
)

// leaseLogs is a concurrency-safe log sink for assertions.
type leaseLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *leaseLogs) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *leaseLogs) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *leaseLogs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newLeaseClock returns a settable clock at a whole millisecond, for
// Config.Clock and, read by millis, WithTestNow.
func newLeaseClock() *clock.Stub { return clock.NewStub(time.UnixMilli(1_800_000_000_000)) }

// millis reads c in Unix milliseconds, as WithTestNow wants.
func millis(c clock.Clock) func() int64 { return func() int64 { return c.Now().UnixMilli() } }

// fataler is what newRedis needs of a test (a *testing.T, *testing.B or
// *rapid.T).
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// newRedis returns the capacity handle of cfg, failing the test on error.
func newRedis(t fataler, cfg capacity.RedisConfig) *capacity.Redis {
	t.Helper()
	r, err := capacity.NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// onRedis is newRedis for rdb with keys under prefix ("": KeyPrefixDefault).
func onRedis(t fataler, rdb redis.UniversalClient, prefix string) *capacity.Redis {
	t.Helper()
	return newRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
}
