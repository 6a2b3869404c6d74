package capacity_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
)

// An outbound call takes a caller ID from its organisation's pool before
// dialling and gives it back, with its token, when the call ends.
func ExampleCallerIDs() {
	ctx := context.Background()
	rdb, err := testredis.Dial(ctx) // redis.NewClient(...) in production
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := testredis.UniquePrefix("capacity", "ExampleCallerIDs")
	defer testredis.DeleteKeys(rdb, prefix)

	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := capacity.NewCallerIDs(r, capacity.CallerIDsConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := pool.Add(ctx, "acme", "+14155550101", "+14155550102"); err != nil {
		fmt.Println(err)
		return
	}

	a, _ := pool.Acquire(ctx, "acme", "call-1")
	b, _ := pool.Acquire(ctx, "acme", "call-2")
	fmt.Println("call-1 dials from", a.Number)
	fmt.Println("call-2 dials from", b.Number)

	_, err = pool.Acquire(ctx, "acme", "call-3")
	switch {
	case errors.Is(err, capacity.ErrNoCallerID):
		fmt.Println(err)
	case errors.Is(err, capacity.ErrCallerIDsUnavailable):
		fmt.Println("Redis down: dial from the default number")
	}

	freed, _ := pool.Release(ctx, "acme", a.Number, a.Token) // call-1 ended
	fmt.Println("freed:", freed)
	c, _ := pool.Acquire(ctx, "acme", "call-3")
	fmt.Println("call-3 dials from", c.Number)
	// Output:
	// call-1 dials from +14155550101
	// call-2 dials from +14155550102
	// capacity: no caller ID free for org "acme": 2/2 busy
	// freed: true
	// call-3 dials from +14155550101
}
