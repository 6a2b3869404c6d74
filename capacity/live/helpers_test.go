package live_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
)

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
	b.rdb, b.prefix = testredis.New(t, "live")
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
