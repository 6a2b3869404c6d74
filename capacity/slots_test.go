package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

func newTestSlots(t testing.TB, r *capacity.Redis, cfg capacity.SlotsConfig) *capacity.Slots {
	t.Helper()
	s, err := capacity.NewSlots(r, cfg)
	if err != nil {
		t.Fatalf("NewSlots: %v", err)
	}
	return s
}

func TestSlotsConfigValidation(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tc := range []struct {
		name string
		cfg  capacity.SlotsConfig
		want string // "" = valid
	}{
		{"defaults", capacity.SlotsConfig{}, ""},
		{"campaign at org cap", capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 4, Campaigns: map[string]int{"spring": 4}}}}, ""},
		{"campaign above org cap", capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 4, Campaigns: map[string]int{"spring": 5}}}},
			`SlotsConfig.Orgs["acme"].Campaigns["spring"] = 5 is above org "acme"'s cap 4`},
		{"campaign above default org cap", capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Campaigns: map[string]int{"spring": 11}}}},
			`Campaigns["spring"] = 11 is above org "acme"'s cap 10`},
		{"campaign zero", capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Campaigns: map[string]int{"spring": 0}}}},
			`SlotsConfig.Orgs["acme"].Campaigns["spring"] must be 1–20, got 0`},
		{"campaign above max", capacity.SlotsConfig{OrgLimit: 50, Orgs: map[string]capacity.OrgSlots{"acme": {Campaigns: map[string]int{"spring": 21}}}},
			`Campaigns["spring"] must be 1–20, got 21`},
		{"default campaign above max", capacity.SlotsConfig{CampaignLimit: 21}, "SlotsConfig.CampaignLimit must be 1–20"},
		{"negative org", capacity.SlotsConfig{OrgLimit: -1}, "SlotsConfig.OrgLimit"},
		{"negative org entry", capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Limit: -2}}}, `SlotsConfig.Orgs["acme"].Limit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := capacity.NewSlots(captest.OnRedis(t, rdb, ""), tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NewSlots: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NewSlots error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSlotsLimits(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newTestSlots(t, captest.OnRedis(t, rdb, ""), capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{
		"small": {Limit: 3}, "acme": {Limit: 12, Campaigns: map[string]int{"spring": 8}}}})
	for _, tc := range []struct {
		org, camp      string
		wantOrg, wantC int
	}{
		{"other", "", 10, 0}, {"other", "x", 10, 5}, {"small", "x", 3, 3}, {"acme", "spring", 12, 8}, {"acme", "autumn", 12, 5},
	} {
		if o, c := s.Limits(tc.org, tc.camp); o != tc.wantOrg || c != tc.wantC {
			t.Errorf("Limits(%q, %q) = %d, %d; want %d, %d", tc.org, tc.camp, o, c, tc.wantOrg, tc.wantC)
		}
	}
}

func TestSlotsAcquireBothCaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{
		Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 3, Campaigns: map[string]int{"spring": 2}}}})

	a, err := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err != nil || a.Uncounted || a.ID == "" {
		t.Fatalf("Acquire 1 = %+v, %v", a, err)
	}
	if _, err := s.Acquire(ctx, "acme", "spring", 0, 0); err != nil {
		t.Fatalf("Acquire 2: %v", err)
	}
	// The campaign is full though the org has room.
	_, err = s.Acquire(ctx, "acme", "spring", 0, 0)
	var ns *capacity.NoSlotError
	if !errors.As(err, &ns) || !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("Acquire 3 error = %v, want a *NoSlotError", err)
	}
	want := capacity.NoSlotError{Org: "acme", Campaign: "spring", OrgInUse: 2, OrgLimit: 3, CampaignInUse: 2, CampaignLimit: 2}
	if *ns != want {
		t.Fatalf("NoSlotError = %+v, want %+v", *ns, want)
	}
	// Another campaign takes the org's last slot, then the org is full for everyone.
	if _, err := s.Acquire(ctx, "acme", "autumn", 0, 0); err != nil {
		t.Fatalf("Acquire autumn: %v", err)
	}
	_, err = s.Acquire(ctx, "acme", "", 0, 0)
	if !errors.As(err, &ns) || ns.OrgInUse != 3 || ns.CampaignLimit != 0 {
		t.Fatalf("Acquire without campaign error = %v, want org full 3/3", err)
	}
	// Releasing a frees one slot in both the org and the campaign (twice is harmless).
	for range 2 {
		if err := a.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if _, err := s.Acquire(ctx, "acme", "spring", 0, 0); err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if n, err := s.LiveCalls(ctx); err != nil || n != 3 {
		t.Fatalf("LiveCalls = %d, %v; want 3", n, err)
	}
}

// An organisation's and a campaign's slot sets live an hour
// (SlotSetIdleTTL) after their newest slot was taken, so an idle
// organisation's sets leave Redis then; a slot itself still goes stale
// after StaleAfter.
func TestSlotSetsExpireAnHourAfterTheLastCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if capacity.SlotSetIdleTTL != time.Hour || capacity.StaleAfterDefault != 20*time.Minute {
		t.Fatalf("SlotSetIdleTTL %s, StaleAfterDefault %s; want 1h and 20m", capacity.SlotSetIdleTTL, capacity.StaleAfterDefault)
	}
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{
		Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 3, Campaigns: map[string]int{"spring": 2}}}})
	if _, err := s.Acquire(ctx, "acme", "spring", 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{prefix + ":{acme}:slots", prefix + ":{acme}:camp:spring"} {
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		// A wide margin below: the script set an hour, and the test reads
		// it back a moment later.
		if ttl <= 50*time.Minute || ttl > time.Hour {
			t.Errorf("%s: TTL %s, want an hour (SlotSetIdleTTL)", key, ttl)
		}
	}
	// A slot itself still goes stale after StaleAfter: its score is now + 20m.
	members, err := rdb.ZRangeWithScores(ctx, prefix+":{acme}:slots", 0, -1).Result()
	if err != nil || len(members) != 1 {
		t.Fatalf("org set: %v, %v; want one slot", members, err)
	}
	if left := time.Until(time.UnixMilli(int64(members[0].Score))); left <= 15*time.Minute || left > 20*time.Minute {
		t.Errorf("the slot goes stale in %s, want 20m (StaleAfterDefault)", left)
	}
}

func TestSlotsAcquireWaitsForRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{OrgLimit: 1})
	held, err := s.Acquire(ctx, "acme", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Timed out: NoSlotError after about the timeout.
	start := time.Now()
	if _, err := s.Acquire(ctx, "acme", "", 60*time.Millisecond, 10*time.Millisecond); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("Acquire with timeout error = %v, want ErrNoSlot", err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("Acquire gave up after %s, before its 60ms timeout", d)
	}
	// A waiter gets the slot once it is released.
	got := make(chan error, 1)
	go func() {
		sl, err := s.Acquire(ctx, "acme", "", 10*time.Second, 5*time.Millisecond)
		if err == nil {
			err = sl.Release(ctx)
		}
		got <- err
	}()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	// A cancelled context ends the wait with its error.
	held, _ = s.Acquire(ctx, "acme", "", 0, 0)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(cctx, "acme", "", time.Minute, 10*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with ended ctx error = %v, want DeadlineExceeded", err)
	}
	_ = held.Release(ctx)
}

func TestSlotsBindAndReleaseCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{
		Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 3, Campaigns: map[string]int{"spring": 2}}}})

	a, _ := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err := a.Bind(ctx, "call-1"); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if err := a.Bind(ctx, "call-1"); err != nil {
		t.Fatalf("Bind of the same slot again: %v", err)
	}
	b, _ := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err := b.Bind(ctx, "call-1"); !errors.Is(err, capacity.ErrAlreadyBound) {
		t.Fatalf("Bind of a bound call error = %v, want ErrAlreadyBound", err)
	}
	// The refused slot was released: the campaign has room for one more.
	c, err := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err != nil {
		t.Fatalf("Acquire after refused Bind: %v", err)
	}
	_ = c.Release(ctx)

	orgKey, campKey := prefix+":{acme}:slots", prefix+":{acme}:camp:spring"
	if n := rdb.ZCard(ctx, campKey).Val(); n != 1 {
		t.Fatalf("campaign set holds %d, want 1", n)
	}
	if err := s.ReleaseCall(ctx, "acme", "call-1"); err != nil {
		t.Fatalf("ReleaseCall: %v", err)
	}
	if err := s.ReleaseCall(ctx, "acme", "call-1"); !errors.Is(err, capacity.ErrNotBound) {
		t.Fatalf("second ReleaseCall error = %v, want ErrNotBound", err)
	}
	if o, c := rdb.ZCard(ctx, orgKey).Val(), rdb.ZCard(ctx, campKey).Val(); o != 0 || c != 0 {
		t.Fatalf("after ReleaseCall org set %d, campaign set %d; want 0, 0", o, c)
	}
	if rdb.Exists(ctx, prefix+":{acme}:call:call-1").Val() != 0 {
		t.Fatal("binding still exists after ReleaseCall")
	}
	if err := s.ReleaseCall(ctx, "acme", "never-bound"); !errors.Is(err, capacity.ErrNotBound) {
		t.Fatalf("ReleaseCall of an unknown call error = %v, want ErrNotBound", err)
	}
	// Once released, the call can be bound again.
	d, _ := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err := d.Bind(ctx, "call-1"); err != nil {
		t.Fatalf("Bind after ReleaseCall: %v", err)
	}
	if ttl := rdb.PTTL(ctx, prefix+":{acme}:call:call-1").Val(); ttl <= 19*time.Minute || ttl > 20*time.Minute {
		t.Fatalf("binding TTL = %s, want about the 20m stale age", ttl)
	}
}

func TestSlotsStaleReclaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{OrgLimit: 2})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	capacity.SetSlotsNowForTest(s, now)

	a, _ := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err := a.Bind(ctx, "call-old"); err != nil {
		t.Fatal(err)
	}
	capacity.SetSlotsNowForTest(s, now.Add(10*time.Minute))
	if _, err := s.Acquire(ctx, "acme", "spring", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "acme", "spring", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("Acquire while full error = %v, want ErrNoSlot", err)
	}
	// 20m after the first acquisition it is stale: the next acquire reclaims it.
	capacity.SetSlotsNowForTest(s, now.Add(StaleAge))
	if n, _ := s.LiveCalls(ctx); n != 1 {
		t.Fatalf("LiveCalls at 20m = %d, want 1", n)
	}
	c, err := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err != nil {
		t.Fatalf("Acquire after the stale age: %v", err)
	}
	if n := rdb.ZCard(ctx, prefix+":{acme}:slots").Val(); n != 2 {
		t.Fatalf("org set holds %d after reclaim, want 2", n)
	}
	// The stale binding no longer blocks its call, and releasing it frees nothing live.
	if err := c.Bind(ctx, "call-old"); err != nil {
		t.Fatalf("Bind to a call whose slot went stale: %v", err)
	}
	if n, _ := s.LiveCalls(ctx); n != 2 {
		t.Fatalf("LiveCalls = %d, want 2", n)
	}
}

// StaleAge is SlotsConfig's default stale age.
const StaleAge = capacity.StaleAfterDefault

// TestSlotsRaceProcesses: several processes and hundreds of goroutines
// fight for the last slots of one org+campaign; an observer checks that
// Redis never counts more than either cap.
func TestSlotsRaceProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, raceSlotsRedis(t, rdb, prefix), raceSlotsConfig())

	// Hold all but the last slots: 1 of the campaign's 3, 2 of the org's 5 elsewhere.
	var pre []capacity.Slot
	for _, camp := range []string{raceCamp, "other", ""} {
		sl, err := s.Acquire(ctx, raceOrg, camp, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		pre = append(pre, sl)
	}

	const procs, perProc, local = 3, 60, 120
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var ps []*exec.Cmd
	var outs []*strings.Builder
	var gos []func() error
	for range procs {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), slotsHelperEnv+"="+prefix, slotsHelperGoEnv+"="+strconv.Itoa(perProc), "TEST_REDIS_URL="+testredis.URL())
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps, outs = append(ps, cmd), append(outs, out)
		gos = append(gos, func() error { _, err := stdin.Write([]byte("go\n")); return err })
	}

	// The observer reads both sets atomically, over and over.
	orgKey, campKey := prefix+":{"+raceOrg+"}:slots", prefix+":{"+raceOrg+"}:camp:"+raceCamp
	stop := make(chan struct{})
	var maxOrg, maxCamp, polls atomic.Int64
	var obs sync.WaitGroup
	obs.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var o, c *redis.IntCmd
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				o, c = p.ZCard(ctx, orgKey), p.ZCard(ctx, campKey)
				return nil
			})
			if err != nil {
				t.Errorf("observer: %v", err)
				return
			}
			polls.Add(1)
			if v := o.Val(); v > maxOrg.Load() {
				maxOrg.Store(v)
			}
			if v := c.Val(); v > maxCamp.Load() {
				maxCamp.Store(v)
			}
		}
	})

	for _, g := range gos {
		if err := g(); err != nil {
			t.Fatal(err)
		}
	}
	grants, err := slotsRaceWorkers(ctx, s, local, "parent")
	if err != nil {
		t.Error(err)
	}
	for i, cmd := range ps {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
		var n int64
		if _, err := fmt.Sscanf(strings.TrimSpace(outs[i].String()), "grants %d", &n); err != nil {
			t.Fatalf("helper %d output %q: %v", i, outs[i], err)
		}
		grants += n
	}
	close(stop)
	obs.Wait()

	t.Logf("%d grants over %d processes, %d observer polls, max in use org %d campaign %d",
		grants, procs+1, polls.Load(), maxOrg.Load(), maxCamp.Load())
	if maxOrg.Load() > raceOrgLimit || maxCamp.Load() > raceCampLimit {
		t.Fatalf("observer saw org %d/%d, campaign %d/%d in use", maxOrg.Load(), raceOrgLimit, maxCamp.Load(), raceCampLimit)
	}
	if grants == 0 || polls.Load() == 0 {
		t.Fatalf("grants %d, polls %d: the race did not run", grants, polls.Load())
	}
	for _, sl := range pre {
		_ = sl.Release(ctx)
	}
	if o, c := rdb.ZCard(ctx, orgKey).Val(), rdb.ZCard(ctx, campKey).Val(); o != 0 || c != 0 {
		t.Fatalf("after every release org set %d, campaign set %d; want 0, 0", o, c)
	}
	if n, err := s.LiveCalls(ctx); err != nil || n != 0 {
		t.Fatalf("LiveCalls = %d, %v; want 0", n, err)
	}
}
