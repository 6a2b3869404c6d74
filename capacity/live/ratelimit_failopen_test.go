package live_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/devservice"
)

// slotsLogs collects log lines; safe for concurrent use.
type slotsLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *slotsLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *slotsLogs) warnings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "level=WARN")
}

// throwawayRedis starts a redis-server of the test's own, which the test
// may stop, and returns a client that gives up fast once it is gone.
func throwawayRedis(t *testing.T) (*devservice.Redis, *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := devservice.StartRedisServer(ctx, devservice.RedisConfig{})
	if err != nil {
		t.Fatalf("starting a throwaway redis-server (install redis-server, e.g. apt-get install redis-server): %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	opt.DialTimeout = 200 * time.Millisecond
	opt.DialerRetries = 1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return srv, rdb
}

func TestRateLimiterFailOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := throwawayRedis(t)
	logs := &slotsLogs{}
	r, err := live.NewRateLimiter(rdb, live.RateLimiterConfig{PerSecond: 1, OpTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, "acme", 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, "acme", 0); !errors.Is(err, live.ErrRateLimited) {
		t.Fatalf("2nd start with Redis up = %v, want ErrRateLimited", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := r.Wait(ctx, "acme", 0); err != nil {
			t.Fatalf("start %d with Redis down = %v, want nil (fail open)", i, err)
		}
	}
	if r.Uncounted() != 3 || logs.warnings() != 1 {
		t.Fatalf("uncounted %d, warnings %d; want 3, 1:\n%s", r.Uncounted(), logs.warnings(), logs.buf.String())
	}
}
