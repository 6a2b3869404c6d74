package live_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
)

// fataler is what newRedis needs of a test (a *testing.T or *rapid.T).
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
