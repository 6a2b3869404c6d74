package capacity_test

import (
	"context"
	"fmt"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A call takes a transcriber slot of its vendor, the process's heartbeat
// keeps it alive, and the call gives it back when the stream ends. The
// example needs the Redis at TEST_REDIS_URL, like the rest of the suite.
func ExampleLeases_Acquire() {
	ctx := context.Background()
	prefix := testredis.UniquePrefix("capacity", "ExampleLeases_Acquire")
	// In production: RedisConfig{URL: ...}, which dials with fail-fast
	// client options.
	r, err := capacity.NewRedis(capacity.RedisConfig{URL: testredis.URL(), KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	defer testredis.DeleteKeys(r.Client(), prefix)

	leases, err := capacity.New(r, capacity.Config{
		Limits: map[string]capacity.ProviderLimit{"deepgram/stt": {Limit: 2, BatchReserve: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	hb := leases.StartHeartbeat(ctx, capacity.HeartbeatConfig{
		OnLost: func(l capacity.Lease) { fmt.Println("lost", l.Holder) },
	})
	defer hb.Stop()

	call, g := leases.Acquire(ctx, capacity.Request{Provider: "deepgram", Kind: capacity.KindSTT, Holder: "call-42", Lane: lane.Live})
	fmt.Printf("live:  granted=%v in use %d of %d uncounted=%v\n", g.Granted, g.InUse, g.Limit, g.Uncounted)

	_, g = leases.Acquire(ctx, capacity.Request{Provider: "deepgram", Kind: capacity.KindSTT, Holder: "job-7", Lane: lane.Batch})
	fmt.Printf("batch: granted=%v in use %d of %d (one slot is kept for live calls)\n", g.Granted, g.InUse, g.Limit)

	leases.Release(ctx, call)
	// Output:
	// live:  granted=true in use 1 of 2 uncounted=false
	// batch: granted=false in use 1 of 2 (one slot is kept for live calls)
}
