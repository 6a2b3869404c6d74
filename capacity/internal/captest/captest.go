// Package captest builds the capacity.Redis handle of a test, for the
// tests of capacity and its sub-packages.
package captest

import (
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
)

// Fataler is what NewRedis needs of a test (a *testing.T, *testing.B or
// *rapid.T).
type Fataler interface {
	Helper()
	Fatal(args ...any)
}

// NewRedis returns the capacity handle of cfg, failing the test on error.
func NewRedis(t Fataler, cfg capacity.RedisConfig) *capacity.Redis {
	t.Helper()
	r, err := capacity.NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// OnRedis is NewRedis for rdb with keys under prefix ("":
// capacity.KeyPrefixDefault).
func OnRedis(t Fataler, rdb redis.UniversalClient, prefix string) *capacity.Redis {
	t.Helper()
	return NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
}
