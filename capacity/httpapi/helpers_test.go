package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisURL is the Redis the tests use: TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0.
func redisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// leaseClient connects to redisURL and fails the test, saying how to start
// Redis, if it cannot. The client is closed at cleanup.
func leaseClient(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		tb.Fatalf("parsing TEST_REDIS_URL %q: %v", redisURL(), err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		tb.Fatalf("capacity/httpapi tests need a real Redis at %s (set TEST_REDIS_URL): %v\n"+
			"start one with `redis-server --port 6379` (or `make test`, which starts a throwaway one)", redisURL(), err)
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
	prefix := "cstest:httpapi:" + name + ":" + hex.EncodeToString(b[:])
	tb.Cleanup(func() { deleteKeys(rdb, prefix) })
	return prefix
}

func deleteKeys(rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
