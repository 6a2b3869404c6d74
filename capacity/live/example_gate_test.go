package live_test

import (
	"context"
	"fmt"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// The gate admits Size calls at once, over every process sharing it,
// below the smallest pool behind it.
func ExampleGate() {
	ctx := context.Background()
	rdb, err := testredis.Dial(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := testredis.UniquePrefix("live", "example")
	defer testredis.DeleteKeys(rdb, prefix)
	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	ceilings := map[string]int{"vendor_plan": 40, "sip_trunk": 100}
	gate, err := live.NewGate(r, live.GateConfig{Size: 1, Ceilings: ceilings, Timeout: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	ticket, err := gate.Enter(ctx, "acme", "call-1")
	fmt.Println("1st call:", err)
	_, err = gate.Enter(ctx, "acme", "call-2")
	fmt.Println("2nd call:", err, "- rejected:", gate.Rejected())
	fmt.Println("left:", gate.Leave(ctx, ticket))

	_, err = live.NewGate(r, live.GateConfig{Size: 40, Ceilings: ceilings})
	fmt.Println(err)
	// Output:
	// 1st call: <nil>
	// 2nd call: no room among 1 calls after 0s: capacity: admission gate full - rejected: 1
	// left: true
	// GateConfig.Size 40 must be below the smallest ceiling, vendor_plan = 40
}
