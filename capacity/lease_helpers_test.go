package capacity_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaseRedisURL is the Redis the lease tests use: TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0.
func leaseRedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// leaseClient connects to leaseRedisURL and fails the test, saying how to
// start Redis, if it cannot. The client is closed at cleanup.
func leaseClient(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(leaseRedisURL())
	if err != nil {
		tb.Fatalf("parsing TEST_REDIS_URL %q: %v", leaseRedisURL(), err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		tb.Fatalf("capacity tests need a real Redis at %s (set TEST_REDIS_URL): %v\n"+
			"start one with `redis-server --port 6379` (or `make test`, which starts a throwaway one)", leaseRedisURL(), err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// leasePrefix returns a key prefix unique to this test and deletes its keys
// at cleanup.
func leasePrefix(tb testing.TB, rdb redis.UniversalClient) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
	prefix := "cstest:" + name + ":" + hex.EncodeToString(b[:])
	tb.Cleanup(func() { leaseDeleteKeys(rdb, prefix) })
	return prefix
}

func leaseDeleteKeys(rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

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

// leaseClock is a settable clock in Unix milliseconds, for WithTestNow and
// Config.Now.
type leaseClock struct {
	mu sync.Mutex
	ms int64
}

func newLeaseClock() *leaseClock { return &leaseClock{ms: 1_800_000_000_000} }

func (c *leaseClock) Ms() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ms
}

func (c *leaseClock) Now() time.Time { return time.UnixMilli(c.Ms()) }

func (c *leaseClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ms += d.Milliseconds()
}
