package capacity_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/testredis"
)

// windowLeaseRig is a scope's window and a provider's leases on one
// client and key prefix, both on the clock now.
type windowLeaseRig struct {
	w      *capacity.Windows
	leases *capacity.Leases
}

const wlProvider = "wl-vendor"

func newWindowLeaseRig(t captest.Fataler, rdb *redis.Client, prefix string, now func() int64, size, limit, reserve int) windowLeaseRig {
	return newWindowLeaseRigLinger(t, rdb, prefix, now, size, limit, reserve, 0)
}

// newWindowLeaseRigLinger is newWindowLeaseRig with the windows'
// ReleaseLinger.
func newWindowLeaseRigLinger(t captest.Fataler, rdb *redis.Client, prefix string, now func() int64, size, limit, reserve int, linger time.Duration) windowLeaseRig {
	r := captest.OnRedis(t, rdb, prefix)
	w, err := capacity.NewWindows(r, capacity.WithWindowTestNow(capacity.WindowConfig{Initial: size, StartTarget: size, ImmediateShare: -1,
		ReleaseLinger: linger}, now))
	if err != nil {
		t.Fatal(err)
	}
	leases, err := capacity.New(r, capacity.WithTestNow(capacity.Config{Limits: map[string]capacity.ProviderLimit{
		wlProvider + "/" + capacity.KindSTT: {Limit: limit, BatchReserve: reserve}}}, now))
	if err != nil {
		t.Fatal(err)
	}
	return windowLeaseRig{w: w, leases: leases}
}

func wlRequests(holder string, l lane.Lane) (capacity.WindowRequest, capacity.Request) {
	return capacity.WindowRequest{Scope: "wl-scope", Holder: holder, Lane: l},
		capacity.Request{Provider: wlProvider, Kind: capacity.KindSTT, Holder: holder, Lane: lane.Batch, ID: "pipeline:" + holder}
}

// One script takes the window slot and the lease; a lease refused leaves
// the window slot held for the caller to give back; a window that refuses
// asks for no lease.
func TestAcquireWithLeaseTakesBothInOneScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "wl")
	calls := &scriptCounter{}
	rdb.AddHook(calls)
	var clock atomic.Int64
	clock.Store(1_800_000_000_000)
	rig := newWindowLeaseRig(t, rdb, prefix, clock.Load, 2, 1, 0)

	req, lreq := wlRequests("a", lane.Batch)
	before := calls.n.Load()
	g, lease, lg, tried := rig.w.AcquireWithLease(ctx, req, rig.leases, lreq)
	if got := calls.n.Load() - before; got != 1 {
		t.Fatalf("%d scripts for a window slot and a lease, want 1", got)
	}
	if !g.Granted || g.Uncounted || g.InFlight != 1 || !tried || !lg.Granted || lg.Uncounted || lg.InUse != 1 || !lease.Counted() || lease.ID != lreq.ID {
		t.Fatalf("a: window %+v, lease %+v %+v, tried %v", g, lease, lg, tried)
	}

	// The plan (1) is full: the window grants, the lease is refused.
	reqB, lreqB := wlRequests("b", lane.Batch)
	g, lease, lg, tried = rig.w.AcquireWithLease(ctx, reqB, rig.leases, lreqB)
	if !g.Granted || g.InFlight != 2 || !tried || lg.Granted || lease.Counted() || lg.InUse != 1 {
		t.Fatalf("b: window %+v, lease %+v %+v, tried %v; want the window granted and the lease refused", g, lease, lg, tried)
	}
	rel := rig.w.ReleaseWithLease(ctx, reqB.Scope, reqB.Holder, capacity.Neutral, "", 0, rig.leases, rig.leases.Restore(capacity.Lease{ID: lreqB.ID, Provider: wlProvider, Kind: capacity.KindSTT, Holder: "b"}, true))
	if !rel.Released {
		t.Fatalf("b's window slot not released: %+v", rel)
	}

	// The window (2) is full: no lease is asked for.
	reqC, lreqC := wlRequests("c", lane.Batch)
	if g, _, _, _ := rig.w.AcquireWithLease(ctx, reqB, rig.leases, lreqB); !g.Granted {
		t.Fatalf("b again: %+v", g)
	}
	g, lease, lg, tried = rig.w.AcquireWithLease(ctx, reqC, rig.leases, lreqC)
	if g.Granted || tried || lease.Counted() || lg.Granted {
		t.Fatalf("c: window %+v, lease %+v %+v, tried %v; want the window refused and no lease asked", g, lease, lg, tried)
	}
	st, err := rig.leases.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st {
		if p.Provider == wlProvider && p.InUse != 1 {
			t.Fatalf("%d leases held, want a's only", p.InUse)
		}
	}
}

// Redis unreachable: both are granted uncounted (fail open), as Acquire
// and Leases.Acquire grant each.
func TestAcquireWithLeaseFailsOpen(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	rig := newWindowLeaseRig(t, dead, "wl-dead", func() int64 { return 1_800_000_000_000 }, 2, 1, 0)
	req, lreq := wlRequests("a", lane.Batch)
	g, lease, lg, tried := rig.w.AcquireWithLease(context.Background(), req, rig.leases, lreq)
	if !g.Granted || !g.Uncounted || !tried || !lg.Granted || !lg.Uncounted || lease.Counted() {
		t.Fatalf("window %+v, lease %+v %+v, tried %v; want both granted uncounted", g, lease, lg, tried)
	}
}

// laterReleases checks the answers of releases one rig made with
// ReleaseLater against another rig's answers to the same releases made
// at once (want, in order).
type laterReleases struct {
	want []capacity.WindowRelease
	// got: the later releases' answers, which come on a goroutine of
	// their own when an acquire carried them.
	got chan capacity.WindowRelease
}

func newLaterReleases() *laterReleases {
	return &laterReleases{got: make(chan capacity.WindowRelease, 256)}
}

func (l *laterReleases) answered(r capacity.WindowRelease) { l.got <- r }

// collect checks the answers of every release w has sent, all of them
// (after an acquire or a flush): each must be the one wanted.
func (l *laterReleases) collect(t *rapid.T, w *capacity.Windows, step int) {
	for _, r2 := range l.want {
		select {
		case r1 := <-l.got:
			if fmt.Sprint(r1) != fmt.Sprint(r2) {
				t.Fatalf("step %d: release %+v sent later, %+v at once", step, r1, r2)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("step %d: a release rig one sent was not answered", step)
		}
	}
	if len(l.got) != 0 || w.Queued() != 0 {
		t.Fatalf("step %d: %d answers more than the releases made, %d still queued", step, len(l.got), w.Queued())
	}
	l.want = nil
}

// The one script answers as the two calls would, step by step, for any
// sequence of acquires (immediate or batch), releases of every outcome,
// live leases filling the plan and time passing: two rigs on their own
// keys, one driven through AcquireWithLease, the other through Acquire
// then Leases.Acquire, agree on every window grant, every lease grant and
// the leases held. Rig one also gives its slots back with ReleaseLater
// (its releases that went well wait for its next acquire, which sends
// them first in its own script), rig two with ReleaseWithLease at once:
// every release must answer the same. Rig one flushes before time passes
// and before a live call asks (a release waits milliseconds in its
// process, not the minutes a step here may skip, and until it is sent
// its vendor slot counts as held, as the docs say).
func TestAcquireWithLeaseIsTheTwoCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testredis.Client(t)
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		var clock atomic.Int64
		clock.Store(1_800_000_000_000)
		size := rapid.IntRange(1, 4).Draw(t, "size")
		limit := rapid.IntRange(1, 4).Draw(t, "limit")
		reserve := rapid.IntRange(0, limit-1).Draw(t, "reserve")
		one := newWindowLeaseRigLinger(t, rdb, testredis.UniquePrefix("wl-one", fmt.Sprint(run)), clock.Load, size, limit, reserve, time.Hour)
		two := newWindowLeaseRig(t, rdb, testredis.UniquePrefix("wl-two", fmt.Sprint(run)), clock.Load, size, limit, reserve)
		defer func() {
			testredis.DeleteMatching(rdb, testredis.UniquePrefix("wl-one", fmt.Sprint(run))+"*")
			testredis.DeleteMatching(rdb, testredis.UniquePrefix("wl-two", fmt.Sprint(run))+"*")
		}()
		holders := []string{"h0", "h1", "h2", "h3", "h4", "h5"}
		live := map[string]capacity.Lease{}
		liveTwo := map[string]capacity.Lease{}
		rel := newLaterReleases()
		var step int
		collect := func() { rel.collect(t, one.w, step) }
		flush := func() {
			one.w.Flush(ctx)
			collect()
		}
		defer func() {
			if !t.Failed() {
				flush()
			}
		}()
		for step = range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(t, "op"); op {
			case 0, 1: // a submission asks for its slot and lease
				h := rapid.SampledFrom(holders).Draw(t, "holder")
				l := lane.Batch
				if rapid.Bool().Draw(t, "immediate") {
					l = lane.Immediate
				}
				req, lreq := wlRequests(h, l)
				g1, lease1, lg1, tried1 := one.w.AcquireWithLease(ctx, req, one.leases, lreq)
				g2 := two.w.Acquire(ctx, req)
				var lease2 capacity.Lease
				var lg2 capacity.Grant
				if g2.Granted {
					lease2, lg2 = two.leases.Acquire(ctx, lreq)
				}
				if fmt.Sprint(g1) != fmt.Sprint(g2) {
					t.Fatalf("step %d: window %+v in one script, %+v in two", step, g1, g2)
				}
				collect() // the acquire sent rig one's waiting releases first
				if tried1 != g2.Granted || lg1 != lg2 || lease1.Counted() != lease2.Counted() || lease1.Expires != lease2.Expires {
					t.Fatalf("step %d: lease %+v %+v (asked %v) in one script, %+v %+v in two", step, lease1, lg1, tried1, lease2, lg2)
				}
			case 2: // its answer gives both back
				h := rapid.SampledFrom(holders).Draw(t, "holder")
				o := capacity.Outcome(rapid.IntRange(0, 3).Draw(t, "outcome"))
				lease := capacity.Lease{ID: "pipeline:" + h, Provider: wlProvider, Kind: capacity.KindSTT, Holder: h}
				r2 := two.w.ReleaseWithLease(ctx, "wl-scope", h, o, "test", 0, two.leases, two.leases.Restore(lease, true))
				rel.want = append(rel.want, r2)
				one.w.ReleaseLater(ctx, "wl-scope", h, o, "test", 0, one.leases, one.leases.Restore(lease, true), rel.answered)
				if o == capacity.Overload || o == capacity.Refused {
					if one.w.Queued() != 0 {
						t.Fatalf("step %d: a release with outcome %v did not go at once", step, o)
					}
					collect()
				}
			case 3: // a live call takes or gives back a slot of the plan
				flush()
				id := fmt.Sprint("live-", rapid.IntRange(0, 2).Draw(t, "live"))
				if l, ok := live[id]; ok {
					one.leases.Release(ctx, l)
					two.leases.Release(ctx, liveTwo[id])
					delete(live, id)
					delete(liveTwo, id)
					break
				}
				req := capacity.Request{Provider: wlProvider, Kind: capacity.KindSTT, Holder: id, Lane: lane.Live, ID: id}
				l1, g1 := one.leases.Acquire(ctx, req)
				l2, g2 := two.leases.Acquire(ctx, req)
				if g1 != g2 {
					t.Fatalf("step %d: live lease %+v and %+v", step, g1, g2)
				}
				if g1.Granted {
					live[id], liveTwo[id] = l1, l2
				}
			case 4: // time passes (leases and slots lapse after minutes)
				flush()
				clock.Add(rapid.Int64Range(1, 200_000).Draw(t, "ms"))
			}
		}
	})
}
