package live_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// The rate limiter spaces a campaign's call starts: one per second here.
func ExampleRateLimiter() {
	ctx := context.Background()
	rdb, err := testredis.Dial(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := testredis.UniquePrefix("live", "example")
	defer rdb.Del(ctx, prefix+":{acme}:starts:spring")

	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	starts, err := live.NewRateLimiter(r, live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"spring": 1}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("1st start:", starts.Wait(ctx, "acme", "spring", 0))
	err = starts.Wait(ctx, "acme", "spring", 0)
	fmt.Println("2nd start rate limited:", errors.Is(err, live.ErrRateLimited))
	// Output:
	// 1st start: <nil>
	// 2nd start rate limited: true
}

// An organisation's start rate counts all its campaigns together: at 2 a
// second, its third campaign's start is refused by the organisation's
// rate though that campaign has room of its own.
func ExampleRateLimiter_orgRate() {
	ctx := context.Background()
	rdb, err := testredis.Dial(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := testredis.UniquePrefix("live", "example-org")
	defer testredis.DeleteKeys(rdb, prefix)

	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	starts, err := live.NewRateLimiter(r, live.RateLimiterConfig{Orgs: map[string]int{"acme": 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("spring:", starts.Wait(ctx, "acme", "spring", 0))
	fmt.Println("autumn:", starts.Wait(ctx, "acme", "autumn", 0))
	var rl *live.RateLimitedError
	if err := starts.Wait(ctx, "acme", "winter", 0); errors.As(err, &rl) {
		fmt.Println("winter limited by:", rl.LimitedBy, rl.Limit)
	}
	// Output:
	// spring: <nil>
	// autumn: <nil>
	// winter limited by: org 2
}
