package outbox_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
)

// capRedis is the capacity handle of a test: rdb with keys under prefix.
func capRedis(t testing.TB, rdb redis.UniversalClient, prefix string) *capacity.Redis {
	t.Helper()
	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
