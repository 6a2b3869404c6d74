package capacity_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A call takes a transcriber slot of its vendor, the process's heartbeat
// keeps it alive, and the call gives it back when the stream ends. The
// example needs the Redis at TEST_REDIS_URL, like the rest of the suite.
func ExampleLeases_Acquire() {
	ctx := context.Background()
	opt, err := capacity.FailFastOptions(testredis.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := testredis.UniquePrefix("capacity", "ExampleLeases_Acquire")
	defer testredis.DeleteKeys(rdb, prefix)

	leases, err := capacity.New(capacity.Config{
		Redis:     rdb,
		KeyPrefix: prefix,
		Limits:    map[string]capacity.ProviderLimit{"deepgram/stt": {Limit: 2, BatchReserve: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	hb := leases.StartHeartbeat(ctx, capacity.HeartbeatConfig{
		OnLost: func(l capacity.Lease) { fmt.Println("lost", l.Holder) },
	})
	defer hb.Stop()

	call, g := leases.Acquire(ctx, capacity.Request{Provider: "deepgram", Kind: capacity.KindSTT, Holder: "call-42", Lane: capacity.Live})
	fmt.Printf("live:  granted=%v in use %d of %d uncounted=%v\n", g.Granted, g.InUse, g.Limit, g.Uncounted)

	_, g = leases.Acquire(ctx, capacity.Request{Provider: "deepgram", Kind: capacity.KindSTT, Holder: "job-7", Lane: capacity.Batch})
	fmt.Printf("batch: granted=%v in use %d of %d (one slot is kept for live calls)\n", g.Granted, g.InUse, g.Limit)

	leases.Release(ctx, call)
	// Output:
	// live:  granted=true in use 1 of 2 uncounted=false
	// batch: granted=false in use 1 of 2 (one slot is kept for live calls)
}
