package httpapi_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
)

// failFastClient is a client of url with the fail-fast options of
// RedisConfig.URL (no retries, short timeouts), closed when t ends.
func failFastClient(t interface {
	captest.Fataler
	Cleanup(func())
}, url string) redis.UniversalClient {
	t.Helper()
	r := captest.NewRedis(t, capacity.RedisConfig{URL: url})
	t.Cleanup(func() { _ = r.Close() })
	return r.Client()
}
