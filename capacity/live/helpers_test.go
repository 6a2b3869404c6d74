package live_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/internal/testredis"
)

// leaseBundle is what a live-call test needs.
type leaseBundle struct {
	rdb    *redis.Client
	prefix string
	leases *capacity.Leases
	redis  *capacity.Redis
}

// leaseSetup returns Leases over a fresh key prefix (the bundle's redis). The scripts read Redis TIME: these tests never
// move the clock.
func leaseSetup(t *testing.T, cfg capacity.Config) *leaseBundle {
	t.Helper()
	b := &leaseBundle{}
	b.rdb, b.prefix = testredis.New(t, "live")
	b.redis = captest.OnRedis(t, b.rdb, b.prefix)
	l, err := capacity.New(b.redis, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.leases = l
	return b
}

// zcard returns how many members provider/kind's lease set has.
func (b *leaseBundle) zcard(t *testing.T, provider, kind string) int {
	t.Helper()
	n, err := b.rdb.ZCard(context.Background(), rediskit.Key(b.prefix, provider+"/"+kind, "leases")).Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}
