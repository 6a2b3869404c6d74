package capacity_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// Slots race test: the helper processes and the parent share this config.
const (
	slotsHelperEnv       = "CALLSCRIBE_TEST_SLOTS_HELPER" // key prefix
	slotsHelperGoEnv     = "CALLSCRIBE_TEST_SLOTS_GOROUTINES"
	raceOrg, raceCamp    = "org-race", "camp-race"
	raceOrgLimit         = 5
	raceCampLimit        = 3
	raceRoundsPerRoutine = 20
)

// raceSlotsRedis is the handle of the race's processes: round trips of up
// to 5s, so that a loaded machine does not make them fail open.
func raceSlotsRedis(t captest.Fataler, rdb redis.UniversalClient, prefix string) *capacity.Redis {
	return captest.NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, AdmitOpTimeout: 5 * time.Second})
}

func raceSlotsConfig() capacity.SlotsConfig {
	return capacity.SlotsConfig{
		Orgs: map[string]capacity.OrgSlots{raceOrg: {Limit: raceOrgLimit, Campaigns: map[string]int{raceCamp: raceCampLimit}}}}
}

// slotsRaceWorkers runs n goroutines that each take and give back a slot of
// raceOrg/raceCamp raceRoundsPerRoutine times, alternating Release and
// Bind+ReleaseCall. It returns the grants, and an error if this process
// ever held more slots at once than the campaign cap.
func slotsRaceWorkers(ctx context.Context, s *capacity.Slots, n int, tag string) (int64, error) {
	var grants, inUse atomic.Int64
	var overErr atomic.Value
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for r := range raceRoundsPerRoutine {
				sl, err := s.Acquire(ctx, raceOrg, raceCamp, 0, 0)
				if err != nil {
					continue
				}
				if sl.Uncounted {
					overErr.Store(fmt.Errorf("uncounted slot: Redis failed"))
					return
				}
				grants.Add(1)
				if v := inUse.Add(1); v > raceCampLimit {
					overErr.Store(fmt.Errorf("%d slots held at once in one process, campaign cap %d", v, raceCampLimit))
				}
				time.Sleep(time.Duration(r%3) * 100 * time.Microsecond) // hold the slot a moment
				inUse.Add(-1)
				if r%2 == 0 {
					_ = sl.Release(ctx)
					continue
				}
				call := fmt.Sprintf("%s-%d-%d", tag, g, r)
				if err := sl.Bind(ctx, call); err != nil {
					overErr.Store(fmt.Errorf("bind %s: %w", call, err))
				}
				_ = s.ReleaseCall(ctx, raceOrg, call)
			}
		})
	}
	wg.Wait()
	if e, ok := overErr.Load().(error); ok {
		return grants.Load(), e
	}
	return grants.Load(), nil
}

// runSlotsHelperProcess is one contender process of the slots race test:
// it runs slotsRaceWorkers and prints "grants N" on stdout. ok is false
// when the test binary was not started as such a helper.
func runSlotsHelperProcess() (code int, ok bool) {
	prefix := os.Getenv(slotsHelperEnv)
	if prefix == "" {
		return 0, false
	}
	n, err := strconv.Atoi(os.Getenv(slotsHelperGoEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad", slotsHelperGoEnv, err)
		return 1, true
	}
	ctx := context.Background()
	rdb, err := testredis.Dial(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	defer rdb.Close()
	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, AdmitOpTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	s, err := capacity.NewSlots(r, raceSlotsConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	// Wait for the parent's go-ahead on stdin so all processes start together.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "waiting for go-ahead:", err)
		return 1, true
	}
	grants, err := slotsRaceWorkers(ctx, s, n, "p"+strconv.Itoa(os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	fmt.Printf("grants %d\n", grants)
	return 0, true
}
