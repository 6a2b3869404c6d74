package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// A call takes an organisation+campaign slot before dialling, binds it to
// the call once connected, and frees it when the call ends.
func ExampleSlots() {
	ctx := context.Background()
	rdb, err := dialRedis(ctx, testRedisURL()) // redis.NewClient(...) in production
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := uniquePrefix()
	defer func() {
		keys, _ := rdb.Keys(ctx, prefix+":*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}()

	slots, err := capacity.NewSlots(rdb, capacity.SlotsConfig{
		KeyPrefix: prefix,
		Orgs:      map[string]capacity.OrgSlots{"acme": {Limit: 10, Campaigns: map[string]int{"spring-renewals": 1}}},
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

	_ = slots.ReleaseCall(ctx, "call-42") // the call ended
	live, _ = slots.LiveCalls(ctx)
	fmt.Println("live calls:", live)
	// Output:
	// live calls: 1
	// no slot: campaign 1/1, org 1/10
	// live calls: 0
}

// The rate limiter spaces call starts: one per second here.
func ExampleRateLimiter() {
	ctx := context.Background()
	rdb, err := dialRedis(ctx, testRedisURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	prefix := uniquePrefix()
	defer rdb.Del(ctx, prefix+":{acme}:starts")

	starts, err := capacity.NewRateLimiter(rdb, capacity.RateLimiterConfig{KeyPrefix: prefix, Orgs: map[string]int{"acme": 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("1st start:", starts.Wait(ctx, "acme", 0))
	err = starts.Wait(ctx, "acme", 0)
	fmt.Println("2nd start rate limited:", errors.Is(err, capacity.ErrRateLimited))
	// Output:
	// 1st start: <nil>
	// 2nd start rate limited: true
}

// The gate admits Size calls at once, below the smallest per-call pool.
func ExampleGate() {
	gate, err := capacity.NewGate(capacity.GateConfig{Size: 1, Ceilings: map[string]int{"db_pool": 40, "stt_sockets": 100}, Timeout: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := gate.Enter(context.Background())
	fmt.Println("1st call:", err)
	_, err = gate.Enter(context.Background())
	fmt.Println("2nd call:", err, "- rejected:", gate.Rejected())
	release()

	_, err = capacity.NewGate(capacity.GateConfig{Size: 40, Ceilings: map[string]int{"db_pool": 40, "stt_sockets": 100}})
	fmt.Println(err)
	// Output:
	// 1st call: <nil>
	// 2nd call: no room among 1 calls after 0s: capacity: admission gate full - rejected: 1
	// GateConfig.Size 40 must be below the smallest ceiling, db_pool = 40
}
