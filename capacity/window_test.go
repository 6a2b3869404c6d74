package capacity_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/testredis"
)

const winScope = "acme:general"

func newTestWindows(t *testing.T, clk *clock.Stub, cfg capacity.WindowConfig) *capacity.Windows {
	t.Helper()
	rdb := testredis.Client(t)
	r := captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "window"))
	if clk != nil {
		cfg = capacity.WithWindowTestNow(cfg, millis(clk))
	}
	w, err := capacity.NewWindows(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func winAcquire(t *testing.T, w *capacity.Windows, holder string, lane capacity.Lane, max int) capacity.WindowGrant {
	t.Helper()
	return w.Acquire(context.Background(), capacity.WindowRequest{Scope: winScope, Holder: holder, Lane: lane, Max: max})
}

func winState(t *testing.T, w *capacity.Windows) capacity.WindowState {
	t.Helper()
	st, err := w.State(context.Background(), winScope)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fill takes slots for holders p0, p1, … until one is refused, and returns
// how many were granted.
func fill(t *testing.T, w *capacity.Windows, prefix string, lane capacity.Lane, max int) int {
	t.Helper()
	for i := range 100 {
		if !winAcquire(t, w, fmt.Sprintf("%s%d", prefix, i), lane, max).Granted {
			return i
		}
	}
	t.Fatal("the window never filled")
	return 0
}

// TestWindowSlowStartAndCooldown: a new window grows by one per success up
// to the plan limit; an overload above the vendor's real limit shrinks it
// to in-flight − 1; a cooldown restarts it at the probe and it grows back
// only to the size it had, not to the plan limit.
func TestWindowSlowStartAndCooldown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newLeaseClock()
	w := newTestWindows(t, clk, capacity.WindowConfig{CeilingRetry: time.Minute})
	const plan = 8
	// Slow start: one more slot per success, so the window doubles per
	// round: 1, 2, 4.
	for round, want := range []int{1, 2} {
		if got := fill(t, w, fmt.Sprintf("r%d-", round), lane.Immediate, plan); got != want {
			t.Fatalf("round %d: %d granted, want %d", round, got, want)
		}
		for i := range want {
			clk.Advance(10 * time.Millisecond)
			w.Release(ctx, winScope, fmt.Sprintf("r%d-%d", round, i), capacity.Success, "", plan)
		}
		clk.Advance(20 * time.Second) // the refused waiter gives up its place
	}
	// The vendor takes only 3: the 4th in flight is refused.
	for i := range 4 {
		if !winAcquire(t, w, fmt.Sprintf("o%d", i), lane.Immediate, plan).Granted {
			t.Fatalf("o%d refused in a window of 4", i)
		}
	}
	w.Release(ctx, winScope, "o3", capacity.Refused, "429 too many concurrent requests", plan)
	if st := winState(t, w); st.Size != 3 || st.Ceiling != 4 {
		t.Fatalf("after an overload at 4 in flight: %+v, want size 3, ceiling 4", st)
	}
	w.Cooldown(ctx, winScope, "429 with Retry-After", plan)
	for _, h := range []string{"o0", "o1", "o2"} {
		w.Release(ctx, winScope, h, capacity.Success, "", plan) // answers from before the cooldown
	}
	if st := winState(t, w); st.Size != 1 || st.Target != 3 || st.Phase != "probe" {
		t.Fatalf("after the cooldown: %+v, want size 1 (the probe), target 3", st)
	}
	clk.Advance(20 * time.Second)
	// Probe, then slow start back to 3 and no further.
	sizes := []int{}
	for i := range 6 {
		h := fmt.Sprintf("p%d", i)
		if !winAcquire(t, w, h, lane.Immediate, plan).Granted {
			t.Fatalf("%s refused", h)
		}
		w.Release(ctx, winScope, h, capacity.Success, "", plan)
		sizes = append(sizes, winState(t, w).Size)
	}
	if fmt.Sprint(sizes) != "[2 3 3 3 3 3]" {
		t.Fatalf("sizes after each success %v, want [2 3 3 3 3 3]", sizes)
	}
	ev, err := w.Events(ctx, winScope)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, e := range ev {
		kinds = append(kinds, e.Kind)
	}
	joined := strings.Join(kinds, ",")
	for _, k := range []string{"open", "shrink", "cooldown", "grow"} {
		if !strings.Contains(joined, k) {
			t.Errorf("events %s: no %q", joined, k)
		}
	}
}

// TestWindowNoiseAtAProvenLevel: one overload that does not say why (a
// plain 429) keeps the window (random throttling); Strikes in a row, with
// no success at that level between, shrink it (the vendor's limit
// dropped).
func TestWindowNoiseAtAProvenLevel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newTestWindows(t, newLeaseClock(), capacity.WindowConfig{Initial: 3, StartTarget: 3, Strikes: 2})
	for i := range 3 {
		winAcquire(t, w, fmt.Sprintf("a%d", i), lane.Immediate, 0)
	}
	for i := range 3 {
		w.Release(ctx, winScope, fmt.Sprintf("a%d", i), capacity.Success, "", 0)
	}
	overloadAtThree := func(tag string) {
		for i := range 3 {
			winAcquire(t, w, fmt.Sprintf("%s%d", tag, i), lane.Immediate, 0)
		}
		w.Release(ctx, winScope, tag+"2", capacity.Overload, "429", 0)
		w.Release(ctx, winScope, tag+"0", capacity.Neutral, "", 0)
		w.Release(ctx, winScope, tag+"1", capacity.Neutral, "", 0)
	}
	overloadAtThree("b")
	if st := winState(t, w); st.Size != 3 {
		t.Fatalf("one overload at a proven level: size %d, want 3 kept", st.Size)
	}
	overloadAtThree("c")
	if st := winState(t, w); st.Size != 2 {
		t.Fatalf("two overloads in a row at a proven level: size %d, want 2", st.Size)
	}
}

// TestWindowCautiousGrowthAndCeiling: above the size it had, the window
// grows by one only after GrowRounds full windows of successes, and a size
// that drew an overload is not tried again before CeilingRetry.
func TestWindowCautiousGrowthAndCeiling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newLeaseClock()
	w := newTestWindows(t, clk, capacity.WindowConfig{Initial: 2, StartTarget: 2, GrowRounds: 2, CeilingRetry: time.Minute})
	round := func(tag string, size int) {
		for i := range size {
			if !winAcquire(t, w, fmt.Sprintf("%s%d", tag, i), lane.Immediate, 0).Granted {
				t.Fatalf("%s%d refused at size %d", tag, i, size)
			}
		}
		for i := range size {
			w.Release(ctx, winScope, fmt.Sprintf("%s%d", tag, i), capacity.Success, "", 0)
		}
	}
	round("a", 2)
	if st := winState(t, w); st.Size != 2 {
		t.Fatalf("after one full round: size %d, want 2", st.Size)
	}
	round("b", 2)
	if st := winState(t, w); st.Size != 3 {
		t.Fatalf("after two full rounds: size %d, want 3", st.Size)
	}
	// 3 draws an overload: back to 2, and 3 is not tried for a minute.
	for i := range 3 {
		winAcquire(t, w, fmt.Sprintf("c%d", i), lane.Immediate, 0)
	}
	w.Release(ctx, winScope, "c2", capacity.Refused, "429 too many concurrent requests", 0)
	w.Release(ctx, winScope, "c0", capacity.Success, "", 0)
	w.Release(ctx, winScope, "c1", capacity.Success, "", 0)
	for i := range 10 {
		round(fmt.Sprintf("d%d-", i), 2)
	}
	if st := winState(t, w); st.Size != 2 {
		t.Fatalf("within the ceiling's retry: size %d, want 2", st.Size)
	}
	clk.Advance(61 * time.Second)
	round("e", 2)
	round("f", 2)
	if st := winState(t, w); st.Size != 3 {
		t.Fatalf("after the retry: size %d, want 3 tried again", st.Size)
	}
}

// TestWindowImmediateBeforeBatch: batch work leaves the immediate share
// free, and a free slot goes to a waiting immediate recording before
// batch ones that waited longer.
func TestWindowImmediateBeforeBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newLeaseClock()
	w := newTestWindows(t, clk, capacity.WindowConfig{Initial: 4, StartTarget: 4, ImmediateShare: 0.25})
	if got := fill(t, w, "b", lane.Batch, 0); got != 3 {
		t.Fatalf("batch took %d slots of 4, want 3 (one kept for the immediate lane)", got)
	}
	if !winAcquire(t, w, "i0", lane.Immediate, 0).Granted {
		t.Fatal("the immediate lane's slot was taken")
	}
	// Full: queue batch b3 (refused in fill) then immediate i1.
	if winAcquire(t, w, "i1", lane.Immediate, 0).Granted {
		t.Fatal("i1 granted in a full window")
	}
	w.Release(ctx, winScope, "b0", capacity.Success, "", 0)
	// b3 asks first, but i1 is present and ahead of it.
	if g := winAcquire(t, w, "b3", lane.Batch, 0); g.Granted {
		t.Fatalf("b3 (batch) took the slot while an immediate recording waited: %+v", g)
	}
	if !winAcquire(t, w, "i1", lane.Immediate, 0).Granted {
		t.Fatal("i1 refused a free slot")
	}
}

// TestWindowWaitsSpreadInOrder: refused requests are told to wait in
// proportion to their place in the queue, and a deferred scope's waiters
// come back after its deadline, spread, earliest deadline first.
func TestWindowWaitsSpreadInOrder(t *testing.T) {
	t.Parallel()
	clk := newLeaseClock()
	w := newTestWindows(t, clk, capacity.WindowConfig{Initial: 2, StartTarget: 2, Hold: time.Second})
	nb := clk.Now().Add(5 * time.Second)
	var waits []time.Duration
	for i := range 6 {
		g := w.Acquire(context.Background(), capacity.WindowRequest{Scope: winScope, Holder: fmt.Sprintf("d%d", i),
			Deadline: clk.Now().Add(time.Duration(i+1) * time.Minute), NotBefore: nb})
		if g.Granted {
			t.Fatalf("d%d granted before the scope's deadline", i)
		}
		waits = append(waits, g.Wait)
	}
	for i, wt := range waits {
		if wt < 5*time.Second {
			t.Errorf("d%d told to wait %v, before the deadline", i, wt)
		}
		if i > 0 && wt <= waits[i-1] {
			t.Errorf("waits not spread in deadline order: %v", waits)
		}
	}
}

// TestWindowLapsedSlotAndRestart: a crashed holder's slot lapses after the
// lease; the window lives in Redis, so a new process sees it as it was.
func TestWindowLapsedSlotAndRestart(t *testing.T) {
	t.Parallel()
	clk := newLeaseClock()
	rdb := testredis.Client(t)
	r := captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "window"))
	cfg := capacity.WithWindowTestNow(capacity.WindowConfig{Initial: 1, StartTarget: 1, Lease: 2 * time.Second}, millis(clk))
	w1, _ := capacity.NewWindows(r, cfg)
	if !winAcquire(t, w1, "crashed", lane.Immediate, 0).Granted {
		t.Fatal("first acquire refused")
	}
	w2, _ := capacity.NewWindows(r, cfg) // another process, or this one restarted
	if winAcquire(t, w2, "other", lane.Immediate, 0).Granted {
		t.Fatal("a second slot granted in a window of 1")
	}
	clk.Advance(3 * time.Second)
	if !winAcquire(t, w2, "other", lane.Immediate, 0).Granted {
		t.Fatal("the crashed holder's slot did not lapse")
	}
	scopes, err := w2.Scopes(context.Background())
	if err != nil || len(scopes) != 1 || scopes[0] != winScope {
		t.Fatalf("Scopes = %v, %v", scopes, err)
	}
}

// TestWindowConcurrentProcesses: goroutines of several Windows (one per
// process) never hold more slots than the window at once.
func TestWindowConcurrentProcesses(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "window")
	var inFlight, peak, granted atomic.Int64
	var wg sync.WaitGroup
	for p := range 3 {
		r := captest.NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, OpTimeout: 2 * time.Second})
		w, err := capacity.NewWindows(r, capacity.WindowConfig{Initial: 3, StartTarget: 3,
			MinWait: time.Millisecond, MaxWait: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 15 {
					h := fmt.Sprintf("p%d-g%d-%d", p, g, i)
					for !w.Acquire(context.Background(), capacity.WindowRequest{Scope: winScope, Holder: h}).Granted {
						time.Sleep(time.Millisecond)
					}
					n := inFlight.Add(1)
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
					granted.Add(1)
					time.Sleep(time.Millisecond)
					inFlight.Add(-1)
					w.Release(context.Background(), winScope, h, capacity.Neutral, "", 0)
				}
			}()
		}
	}
	wg.Wait()
	if peak.Load() > 3 || granted.Load() != 3*8*15 {
		t.Fatalf("peak %d in flight (want ≤ 3), %d granted (want %d)", peak.Load(), granted.Load(), 3*8*15)
	}
}

// A window written before the immediate waiters had their own due set
// (no duei key, no duei field in its state) counts them all the same: the
// first script to load it builds the set from the waiters' due times, so a
// batch request still yields to an immediate one waiting.
func TestWindowBuildsTheImmediateDueSetOfAnOlderWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newLeaseClock()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "window")
	w, err := capacity.NewWindows(captest.OnRedis(t, rdb, prefix),
		capacity.WithWindowTestNow(capacity.WindowConfig{Initial: 4, StartTarget: 4, ImmediateShare: 0.25}, millis(clk)))
	if err != nil {
		t.Fatal(err)
	}
	if got := fill(t, w, "b", lane.Batch, 0); got != 3 {
		t.Fatalf("batch took %d slots of 4, want 3", got)
	}
	if !winAcquire(t, w, "i0", lane.Immediate, 0).Granted {
		t.Fatal("the immediate lane's slot was taken")
	}
	if winAcquire(t, w, "i1", lane.Immediate, 0).Granted {
		t.Fatal("i1 granted in a full window")
	}
	// Make it an older version's window.
	var dueis, states []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		switch k := iter.Val(); {
		case strings.HasSuffix(k, "duei"):
			dueis = append(dueis, k)
		case strings.HasSuffix(k, "state"):
			states = append(states, k)
		}
	}
	if err := iter.Err(); err != nil || len(dueis) != 1 || len(states) != 1 {
		t.Fatalf("window keys: duei %v, state %v (%v); want one of each", dueis, states, err)
	}
	if n, err := rdb.ZCard(ctx, dueis[0]).Result(); err != nil || n != 1 {
		t.Fatalf("the immediate due set holds %d (%v), want i1", n, err)
	}
	if err := rdb.Del(ctx, dueis[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, states[0], "duei").Err(); err != nil {
		t.Fatal(err)
	}

	w.Release(ctx, winScope, "b0", capacity.Success, "", 0)
	if g := winAcquire(t, w, "b3", lane.Batch, 0); g.Granted {
		t.Fatalf("b3 (batch) took the slot while an immediate recording waited: %+v", g)
	}
	if n, err := rdb.ZCard(ctx, dueis[0]).Result(); err != nil || n != 1 {
		t.Fatalf("after the first script, the immediate due set holds %d (%v), want i1 again", n, err)
	}
	if !winAcquire(t, w, "i1", lane.Immediate, 0).Granted {
		t.Fatal("i1 refused a free slot")
	}
	if n, err := rdb.ZCard(ctx, dueis[0]).Result(); err != nil || n != 0 {
		t.Fatalf("i1 granted, the immediate due set holds %d (%v), want none", n, err)
	}
}

// TestWindowRegistersAScopeOncePerInterval: an acquire adds its scope to
// the registry of windows (Scopes) at most once a minute per process, not
// on every request; a registry Redis lost is written again by the first
// acquire a minute later.
func TestWindowRegistersAScopeOncePerInterval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newLeaseClock()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "window")
	r := captest.OnRedis(t, rdb, prefix)
	w, err := capacity.NewWindows(r, capacity.WithWindowTestNow(capacity.WindowConfig{Initial: 4, StartTarget: 4}, millis(clk)))
	if err != nil {
		t.Fatal(err)
	}
	listed := func() bool {
		t.Helper()
		scopes, err := w.Scopes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(scopes) == 1 && scopes[0] == winScope
	}
	cycle := func(holder string) {
		t.Helper()
		if !winAcquire(t, w, holder, lane.Immediate, 0).Granted {
			t.Fatalf("%s refused", holder)
		}
		w.Release(ctx, winScope, holder, capacity.Success, "", 0)
	}
	cycle("a")
	if !listed() {
		t.Fatal("the scope is not listed after its first acquire")
	}
	registry, err := rdb.Keys(ctx, prefix+"*scopes*").Result()
	if err != nil || len(registry) != 1 {
		t.Fatalf("registry keys %v, %v", registry, err)
	}
	if err := rdb.Del(ctx, registry[0]).Err(); err != nil { // as a restarted Redis would
		t.Fatal(err)
	}
	clk.Advance(59 * time.Second)
	cycle("b")
	if listed() {
		t.Fatal("an acquire within a minute of the last registration wrote the registry again")
	}
	clk.Advance(2 * time.Second)
	cycle("c")
	if !listed() {
		t.Fatal("the scope is not listed again after the interval")
	}
}

// TestWindowReleaseWithLease: a window slot and a vendor lease given back
// in one round trip are both given back: when Redis has the release
// script, when it lost it (SCRIPT FLUSH: the pipelined EVALSHA meets
// NOSCRIPT), for a lease not counted, and for leases on another client.
func TestWindowReleaseWithLease(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Client(t)
	r := captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "window"))
	w, err := capacity.NewWindows(r, capacity.WindowConfig{})
	if err != nil {
		t.Fatal(err)
	}
	newLeases := func(r *capacity.Redis) *capacity.Leases {
		l, err := capacity.New(r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	leases := newLeases(r)
	// The same prefix on a client of its own: the release takes two round
	// trips, with the same outcome.
	otherClient := testredis.Client(t)
	elsewhere := newLeases(captest.OnRedis(t, otherClient, r.Kit().Prefix))

	check := func(name string, l *capacity.Leases, flush, counted bool) {
		t.Helper()
		holder := "rec-" + name
		if g := winAcquire(t, w, holder, lane.Batch, 4); !g.Granted {
			t.Fatalf("%s: window slot refused: %+v", name, g)
		}
		lease, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: holder, ID: "pipeline:" + holder})
		if !g.Granted || !lease.Counted() {
			t.Fatalf("%s: lease refused: %+v %+v", name, lease, g)
		}
		if !counted {
			lease = capacity.Lease{}
		}
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		rel := w.ReleaseWithLease(ctx, winScope, holder, capacity.Success, "", 4, l, lease)
		if !rel.Released {
			t.Errorf("%s: the window slot was not released: %+v", name, rel)
		}
		if st := winState(t, w); st.InFlight != 0 {
			t.Errorf("%s: %d requests in flight after the release, want 0", name, st.InFlight)
		}
		again, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "next", ID: "pipeline:next"})
		if g.Granted == !counted {
			t.Errorf("%s: the plan's only vendor slot granted %v after the release (lease counted %v)", name, g.Granted, counted)
		}
		l.Release(ctx, again)
		if !counted {
			l.Release(ctx, l.Restore(capacity.Lease{ID: "pipeline:" + holder, Provider: "acme", Kind: capacity.KindSTT, Holder: holder}, true))
		}
		if got := w.Uncounted() + l.Uncounted(); got != 0 {
			t.Errorf("%s: %d operations went ahead without Redis", name, got)
		}
	}
	check("pipelined", leases, false, true)
	check("noscript", leases, true, true)
	check("uncounted", leases, false, false)
	check("other-client", elsewhere, false, true)
	check("other-client-noscript", elsewhere, true, true)
}

// A release given to ReleaseLater with no acquire after it goes alone
// within ReleaseLinger, with its vendor lease, and its waiter is woken; one
// carried by the scope's next acquire answers from that acquire's script;
// an overload goes at once, after the releases waiting.
func TestWindowReleaseLater(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Client(t)
	r := captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "window"))
	w, err := capacity.NewWindows(r, capacity.WindowConfig{Initial: 1, StartTarget: 1, ReleaseLinger: 20 * time.Millisecond, Hold: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := capacity.New(r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	lreq := func(h string) capacity.Request {
		return capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: h, ID: "pipeline:" + h}
	}
	answers := make(chan capacity.WindowRelease, 4)
	done := func(rel capacity.WindowRelease) { answers <- rel }

	// Alone: a is granted both; b waits in line with its job, asleep (told
	// to come back after a hold of 5s).
	g, lease, lg, _ := w.AcquireWithLease(ctx, capacity.WindowRequest{Scope: winScope, Holder: "a", Lane: lane.Immediate, Max: 1}, leases, lreq("a"))
	if !g.Granted || !lg.Granted {
		t.Fatalf("a: %+v %+v", g, lg)
	}
	if g := w.Acquire(ctx, capacity.WindowRequest{Scope: winScope, Holder: "b", Lane: lane.Immediate, Max: 1, JobID: 42}); g.Granted {
		t.Fatalf("b granted beside a in a window of 1: %+v", g)
	}
	start := time.Now()
	w.ReleaseLater(ctx, winScope, "a", capacity.Success, "", 1, leases, lease, done)
	if st := winState(t, w); st.InFlight != 1 || w.Queued() != 1 {
		t.Fatalf("right after ReleaseLater: %d in flight, %d queued; want 1 and 1 (the slot counts until it is sent)", st.InFlight, w.Queued())
	}
	var rel capacity.WindowRelease
	select {
	case rel = <-answers:
	case <-time.After(10 * time.Second):
		t.Fatal("a release waiting for an acquire that never came was not sent")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("the release went after %v, before its linger of 20ms", took)
	}
	if !rel.Released || fmt.Sprint(rel.Wake) != "[42]" {
		t.Errorf("release sent alone answered %+v, want released, waking job 42", rel)
	}
	if st := winState(t, w); st.InFlight != 0 || w.Queued() != 0 {
		t.Errorf("after the release went: %d in flight, %d queued", st.InFlight, w.Queued())
	}
	// The plan's one vendor slot is free again.
	g, lease, lg, _ = w.AcquireWithLease(ctx, capacity.WindowRequest{Scope: winScope, Holder: "b", Lane: lane.Immediate, Max: 1}, leases, lreq("b"))
	if !g.Granted || !lg.Granted {
		t.Fatalf("b after a's release: %+v %+v", g, lg)
	}

	// Carried: c's acquire sends b's release first, and is granted the
	// slot and the lease b gave back.
	w.ReleaseLater(ctx, winScope, "b", capacity.Success, "", 1, leases, lease, done)
	g, lease, lg, _ = w.AcquireWithLease(ctx, capacity.WindowRequest{Scope: winScope, Holder: "c", Lane: lane.Immediate, Max: 1}, leases, lreq("c"))
	if !g.Granted || !lg.Granted {
		t.Fatalf("c, carrying b's release: %+v %+v", g, lg)
	}
	select {
	case rel = <-answers:
		if !rel.Released {
			t.Errorf("b's release, carried by c's acquire, answered %+v", rel)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's release was not answered by the acquire that carried it")
	}
	if w.Queued() != 0 {
		t.Fatalf("%d releases queued after the acquire that carried them", w.Queued())
	}

	// An overload goes at once.
	w.ReleaseLater(ctx, winScope, "c", capacity.Overload, "HTTP 429", 1, leases, lease, done)
	select {
	case rel = <-answers:
		if !rel.Released {
			t.Errorf("c's overload answered %+v", rel)
		}
	default:
		t.Fatal("an overload waited")
	}
	if got := w.Uncounted() + leases.Uncounted(); got != 0 {
		t.Errorf("%d operations went ahead without Redis", got)
	}
}

// Many goroutines acquiring and releasing later on one scope, while the
// linger timer fires among them: every release is answered exactly once,
// and once flushed nothing is in flight or queued.
func TestWindowReleaseLaterConcurrent(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Client(t)
	r := captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "window"))
	w, err := capacity.NewWindows(r, capacity.WindowConfig{Initial: 4, StartTarget: 4, ReleaseLinger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var answered, released atomic.Int64
	var wg sync.WaitGroup
	const workers, each = 8, 50
	for i := range workers {
		wg.Go(func() {
			for k := range each {
				h := fmt.Sprintf("w%d-%d", i, k)
				for {
					g := w.Acquire(ctx, capacity.WindowRequest{Scope: winScope, Holder: h, Lane: lane.Immediate, Max: 4})
					if g.Granted {
						break
					}
					time.Sleep(time.Millisecond)
				}
				w.ReleaseLater(ctx, winScope, h, capacity.Success, "", 4, nil, capacity.Lease{}, func(rel capacity.WindowRelease) {
					answered.Add(1)
					if rel.Released {
						released.Add(1)
					}
				})
			}
		})
	}
	wg.Wait()
	w.Flush(ctx)
	// Releases an acquire carried answer on goroutines of their own.
	for deadline := time.Now().Add(10 * time.Second); answered.Load() < workers*each && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if a, r := answered.Load(), released.Load(); a != workers*each || r != workers*each {
		t.Errorf("%d releases answered, %d released; want %d each", a, r, workers*each)
	}
	if st := winState(t, w); st.InFlight != 0 || w.Queued() != 0 {
		t.Errorf("after the flush: %d in flight, %d queued", st.InFlight, w.Queued())
	}
}

// ReleaseLinger negative: every release goes at once, answered before
// ReleaseLater returns.
func TestWindowReleaseLingerOff(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Client(t)
	r := captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "window"))
	w, err := capacity.NewWindows(r, capacity.WindowConfig{Initial: 2, StartTarget: 2, ReleaseLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	if g := winAcquire(t, w, "a", lane.Immediate, 2); !g.Granted {
		t.Fatalf("a: %+v", g)
	}
	var rel *capacity.WindowRelease
	w.ReleaseLater(ctx, winScope, "a", capacity.Success, "", 2, nil, capacity.Lease{}, func(r capacity.WindowRelease) { rel = &r })
	if rel == nil || !rel.Released || w.Queued() != 0 {
		t.Fatalf("with ReleaseLinger off: answer %v, %d queued; want released at once", rel, w.Queued())
	}
	if st := winState(t, w); st.InFlight != 0 {
		t.Errorf("%d in flight after the release", st.InFlight)
	}
}
