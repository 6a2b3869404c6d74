package live_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
)

// redisURL is the Redis the tests use: TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0.
func redisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// dialRedis connects to url and pings it.
func dialRedis(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parsing TEST_REDIS_URL %q: %w", url, err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("pinging Redis at %s: %w", url, err)
	}
	return rdb, nil
}

// testRedis returns a client of the test Redis and a key prefix unique to
// this test, whose keys are deleted at the end. It fails the test, saying
// how to start Redis, when Redis cannot be reached.
func testRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	rdb, err := dialRedis(context.Background(), redisURL())
	if err != nil {
		tb.Fatalf("capacity/live tests need a real Redis: %v\n"+
			"start one with `redis-server --port 6379`, or set TEST_REDIS_URL, or run `make test`", err)
	}
	prefix := uniquePrefix(tb.Name())
	tb.Cleanup(func() {
		deleteKeys(rdb, prefix)
		_ = rdb.Close()
	})
	return rdb, prefix
}

// uniquePrefix returns a key prefix no other test or run uses.
func uniquePrefix(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = strings.NewReplacer("/", "_", " ", "_").Replace(name)
	return "cstest:live:" + name + ":" + hex.EncodeToString(b[:])
}

func deleteKeys(rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// leaseBundle is what a live-call test needs.
type leaseBundle struct {
	rdb    *redis.Client
	prefix string
	leases *capacity.Leases
}

// leaseSetup returns Leases over a fresh key prefix (cfg's Redis and
// KeyPrefix are filled in). The scripts read Redis TIME: these tests never
// move the clock.
func leaseSetup(t *testing.T, cfg capacity.Config) *leaseBundle {
	t.Helper()
	b := &leaseBundle{}
	b.rdb, b.prefix = testRedis(t)
	cfg.Redis, cfg.KeyPrefix = b.rdb, b.prefix
	l, err := capacity.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.leases = l
	return b
}

// zcard returns how many members provider/kind's lease set has.
func (b *leaseBundle) zcard(t *testing.T, provider, kind string) int {
	t.Helper()
	n, err := b.rdb.ZCard(context.Background(), capacity.Key(b.prefix, provider+"/"+kind, "leases")).Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}
