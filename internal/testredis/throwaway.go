package testredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/internal/devservice"
)

// Throwaway starts a redis-server of the test's own, which the test may stop
// and start again (fail-open tests), and returns it with a client that gives
// up fast once it is gone. Both are stopped when the test ends.
func Throwaway(t testing.TB) (*devservice.Redis, *redis.Client) {
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
