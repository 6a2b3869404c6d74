package capacity_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
)

// leaseRaceEnv, set to a key prefix, makes the test binary a lease racer
// process (see runLeaseRacer) instead of running tests.
const leaseRaceEnv = "CALLSCRIBE_TEST_LEASE_RACER"

const (
	leaseRaceLimit      = 12
	leaseRaceProcesses  = 4
	leaseRaceGoroutines = 100 // per process
	leaseRaceRounds     = 15  // acquisitions tried per goroutine
)

// init dispatches to the racer before TestMain: main_test.go's TestMain
// belongs to the slots tests, and a racer needs no test flags.
func init() {
	if prefix := os.Getenv(leaseRaceEnv); prefix != "" {
		os.Exit(runLeaseRacer(prefix))
	}
}

func leaseRaceConfig(rdb redis.UniversalClient, prefix string) (capacity.RedisConfig, capacity.Config) {
	return capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, OpTimeout: 30 * time.Second},
		capacity.Config{Limits: map[string]capacity.ProviderLimit{"racer/stt": {Limit: leaseRaceLimit}}}
}

// runLeaseRacer runs leaseRaceGoroutines goroutines that acquire, hold
// briefly and release. It prints one "iv START END" line per grant (wall
// clock ns, START after Acquire returned, END before Release: inside the
// lease's life in Redis) and a final "max N grants G uncounted U" line.
func runLeaseRacer(prefix string) int {
	opt, err := redis.ParseURL(testredis.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opt.PoolSize = 64
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	rcfg, cfg := leaseRaceConfig(rdb, prefix)
	r, err := capacity.NewRedis(rcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := capacity.New(r, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	var cur, maxSeen, grants atomic.Int64
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range leaseRaceGoroutines {
		wg.Go(func() {
			for range leaseRaceRounds {
				lease, grant := l.Acquire(ctx, capacity.Request{Provider: "racer", Kind: capacity.KindSTT, Holder: "g" + strconv.Itoa(g)})
				if !grant.Granted {
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
					continue
				}
				start := time.Now().UnixNano()
				n := cur.Add(1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				grants.Add(1)
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				cur.Add(-1)
				end := time.Now().UnixNano()
				l.Release(ctx, lease)
				mu.Lock()
				fmt.Fprintf(out, "iv %d %d\n", start, end)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(out, "max %d grants %d uncounted %d\n", maxSeen.Load(), grants.Load(), l.Uncounted())
	if err := out.Flush(); err != nil {
		return 1
	}
	return 0
}

// TestLeaseRaceProcesses: several processes and hundreds of goroutines
// fight for one provider's slots; in use never exceeds the limit, as seen
// by an observer polling ZCARD and by sweeping every process's grant
// intervals on one timeline; all leases are released at the end.
func TestLeaseRaceProcesses(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "capacity")
	key := prefix + ":{racer/stt}:leases"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	obsCtx, stopObs := context.WithCancel(context.Background())
	var obsMax, obsPolls atomic.Int64
	obsDone := make(chan struct{})
	go func() {
		defer close(obsDone)
		for obsCtx.Err() == nil {
			n, err := rdb.ZCard(obsCtx, key).Result()
			if err == nil {
				obsPolls.Add(1)
				if n > obsMax.Load() {
					obsMax.Store(n)
				}
			}
		}
	}()

	type result struct {
		out []byte
		err error
	}
	results := make([]result, leaseRaceProcesses)
	var wg sync.WaitGroup
	for i := range leaseRaceProcesses {
		wg.Go(func() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), leaseRaceEnv+"="+prefix, "TEST_REDIS_URL="+testredis.URL())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				err = fmt.Errorf("%w; stderr: %s", err, stderr.String())
			}
			results[i] = result{out, err}
		})
	}
	wg.Wait()
	stopObs()
	<-obsDone

	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	var totalGrants int64
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("racer %d: %v", i, r.err)
		}
		var maxN, grants, uncounted int64
		for line := range strings.Lines(string(r.out)) {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "iv":
				s, _ := strconv.ParseInt(f[1], 10, 64)
				e, _ := strconv.ParseInt(f[2], 10, 64)
				edges = append(edges, edge{s, +1}, edge{e, -1})
			case len(f) == 6 && f[0] == "max":
				maxN, _ = strconv.ParseInt(f[1], 10, 64)
				grants, _ = strconv.ParseInt(f[3], 10, 64)
				uncounted, _ = strconv.ParseInt(f[5], 10, 64)
			}
		}
		// A racer that got no slot at all is possible on a loaded machine;
		// the totals below prove the race happened.
		if uncounted != 0 || maxN > leaseRaceLimit {
			t.Fatalf("racer %d: max %d grants %d uncounted %d", i, maxN, grants, uncounted)
		}
		totalGrants += grants
	}
	if totalGrants == 0 {
		t.Fatal("no racer got a lease: the test proves nothing")
	}
	if int64(len(edges)) != 2*totalGrants {
		t.Fatalf("%d intervals for %d grants", len(edges)/2, totalGrants)
	}
	// Ends before starts at the same instant: touching intervals do not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	cur, sweepMax := 0, 0
	for _, e := range edges {
		cur += e.delta
		sweepMax = max(sweepMax, cur)
	}
	t.Logf("grants %d of %d tries; max in use: observer %d (%d polls), across processes %d; limit %d",
		totalGrants, leaseRaceProcesses*leaseRaceGoroutines*leaseRaceRounds, obsMax.Load(), obsPolls.Load(), sweepMax, leaseRaceLimit)
	if obsMax.Load() > leaseRaceLimit || sweepMax > leaseRaceLimit {
		t.Fatalf("limit %d exceeded: observer saw %d, processes held %d at once", leaseRaceLimit, obsMax.Load(), sweepMax)
	}
	if sweepMax < leaseRaceLimit/2 {
		t.Fatalf("processes never held more than %d at once: the race did not contend", sweepMax)
	}
	if n, err := rdb.ZCard(context.Background(), key).Result(); err != nil || n != 0 {
		t.Fatalf("after all releases: %d leases (%v), want 0", n, err)
	}
}
