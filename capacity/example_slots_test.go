package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A call takes an organisation+campaign slot before dialling, binds it to
// the call once connected, and frees it when the call ends.
func ExampleSlots() {
	ctx := context.Background()
	rdb, err := testredis.Dial(ctx) // redis.NewClient(...) in production
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := testredis.UniquePrefix("capacity", "ExampleSlots")
	defer func() {
		keys, _ := rdb.Keys(ctx, prefix+":*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}()

	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	slots, err := capacity.NewSlots(r, capacity.SlotsConfig{
		Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 10, Campaigns: map[string]int{"spring-renewals": 1}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	slot, err := slots.Acquire(ctx, "acme", "spring-renewals", 0, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := slot.Bind(ctx, "call-42"); err != nil {
		fmt.Println(err)
		return
	}
	live, _ := slots.LiveCalls(ctx)
	fmt.Println("live calls:", live)

	// The campaign's one slot is taken: a second call waits 50ms, then gives up.
	_, err = slots.Acquire(ctx, "acme", "spring-renewals", 50*time.Millisecond, 10*time.Millisecond)
	var full *capacity.NoSlotError
	if errors.As(err, &full) {
		fmt.Printf("no slot: campaign %d/%d, org %d/%d\n", full.CampaignInUse, full.CampaignLimit, full.OrgInUse, full.OrgLimit)
	}

	_ = slots.ReleaseCall(ctx, "acme", "call-42") // the call ended
	live, _ = slots.LiveCalls(ctx)
	fmt.Println("live calls:", live)
	// Output:
	// live calls: 1
	// no slot: campaign 1/1, org 1/10
	// live calls: 0
}
