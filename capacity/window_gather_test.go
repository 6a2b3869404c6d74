package capacity_test

import (
	"context"
	"fmt"
	"sync"
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

// gatherHold records the batches of acquires a Windows sends and can
// hold the next one before it goes, so that a test knows which acquires
// arrive while a script of their scope is on its way.
type gatherHold struct {
	mu      sync.Mutex
	batches [][]capacity.WindowRequest
	hold    chan struct{} // not nil: the next batch waits for it to close
	entered chan struct{}
}

func (h *gatherHold) hook(batch []capacity.WindowRequest) {
	h.mu.Lock()
	h.batches = append(h.batches, batch)
	hold, entered := h.hold, h.entered
	h.hold = nil
	h.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
}

// take returns the batches sent since the last take.
func (h *gatherHold) take() [][]capacity.WindowRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.batches
	h.batches = nil
	return b
}

// together runs calls on goroutines of their own: calls[0] first, held
// at Redis's door until every other call waits behind it in w, in the
// order given (each started once the one before waits, so that a run is
// the same every time), then let go. It returns when all have returned.
func (h *gatherHold) together(t captest.Fataler, w *capacity.Windows, calls []func()) {
	h.mu.Lock()
	h.hold, h.entered = make(chan struct{}), make(chan struct{}, 1)
	hold, entered := h.hold, h.entered
	h.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(calls[0])
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("the first acquire never reached Redis")
	}
	for i, c := range calls[1:] {
		wg.Go(c)
		deadline := time.Now().Add(10 * time.Second)
		for w.WaitingAcquires() != i+1 {
			if time.Now().After(deadline) {
				close(hold)
				t.Fatal(fmt.Sprintf("%d acquires wait behind the first, want %d", w.WaitingAcquires(), i+1))
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	close(hold)
}

// newGatherRig is newWindowLeaseRigLinger with the window's batches
// recorded by h.
func newGatherRig(t captest.Fataler, rdb *redis.Client, prefix string, now func() int64, size, limit int, linger time.Duration, h *gatherHold) windowLeaseRig {
	r := captest.OnRedis(t, rdb, prefix)
	cfg := capacity.WithWindowTestNow(capacity.WindowConfig{Initial: size, StartTarget: size + 2, ImmediateShare: 0.25,
		ReleaseLinger: linger}, now)
	if h != nil {
		cfg = capacity.WithWindowTestGather(cfg, h.hook)
	}
	w, err := capacity.NewWindows(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := capacity.New(r, capacity.WithTestNow(capacity.Config{Limits: map[string]capacity.ProviderLimit{
		wlProvider + "/" + capacity.KindSTT: {Limit: limit}, wgProvider + "/" + capacity.KindSTT: {Limit: limit}}}, now))
	if err != nil {
		t.Fatal(err)
	}
	return windowLeaseRig{w: w, leases: leases}
}

// gatherAnswer is what an acquire was told: the window's grant and, for
// one asked with a lease, the lease's.
type gatherAnswer struct {
	g       capacity.WindowGrant
	lg      capacity.Grant
	counted bool
	expires time.Time
	tried   bool
}

func (a gatherAnswer) String() string {
	return fmt.Sprintf("window %+v lease %+v counted %v expires %d asked %v", a.g, a.lg, a.counted, a.expires.UnixMilli(), a.tried)
}

// wgProvider is a second vendor: a holder's lease is of wgProvider when
// its name ends in an odd digit (wgLease), so that one script takes
// leases on two counters' keys.
const wgProvider = "wg-vendor"

// wgLease is the lease holder asks for with its window slot.
func wgLease(holder string) capacity.Lease {
	p := wlProvider
	if (holder[len(holder)-1]-'0')%2 == 1 {
		p = wgProvider
	}
	return capacity.Lease{ID: "pipeline:" + holder, Provider: p, Kind: capacity.KindSTT, Holder: holder}
}

// gatherAsk sends req to rig, with a lease (wgLease) when withLease.
func gatherAsk(ctx context.Context, rig windowLeaseRig, req capacity.WindowRequest, withLease bool) gatherAnswer {
	if !withLease {
		return gatherAnswer{g: rig.w.Acquire(ctx, req)}
	}
	l := wgLease(req.Holder)
	lreq := capacity.Request{Provider: l.Provider, Kind: l.Kind, Holder: l.Holder, Lane: lane.Batch, ID: l.ID}
	g, lease, lg, tried := rig.w.AcquireWithLease(ctx, req, rig.leases, lreq)
	return gatherAnswer{g: g, lg: lg, counted: lease.Counted(), expires: lease.Expires, tried: tried}
}

// Acquires gathered into one script are answered as if each ran alone, in
// the order the script took them: rig one takes rounds of up to ten
// acquires of a scope at once (window only or with a lease, either lane,
// probes, requests the scope deferred, holders already in flight or in
// line, leases of two vendors, its releases that went well waiting to go
// first), the first held
// at Redis's door until the others wait behind it; rig two, on keys of its
// own, replays each round one acquire at a time in the order rig one's
// scripts took them, its releases sent at once. Every grant, lease, wake
// list and release answer, and the window each ends with, must agree.
// The plan limit is the same for every request: acquires with another
// limit go in scripts of their own, in no order against these.
func TestWindowGatheredAcquiresAreASequentialReplay(t *testing.T) {
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
		h := &gatherHold{}
		p1, p2 := testredis.UniquePrefix("wg-one", fmt.Sprint(run)), testredis.UniquePrefix("wg-two", fmt.Sprint(run))
		one := newGatherRig(t, rdb, p1, clock.Load, size, limit, time.Hour, h)
		two := newGatherRig(t, rdb, p2, clock.Load, size, limit, -1, nil)
		defer func() {
			testredis.DeleteMatching(rdb, p1+"*")
			testredis.DeleteMatching(rdb, p2+"*")
		}()
		holders := []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"}
		rel := newLaterReleases()
		collect := func(step int) { rel.collect(t, one.w, step) }
		job := int64(0)
		for step := range rapid.IntRange(1, 25).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); op {
			case 0, 1, 2: // a round of acquires arriving together
				n := rapid.IntRange(1, 10).Draw(t, "acquires")
				reqs := make([]capacity.WindowRequest, n)
				leased := map[int64]bool{}
				index := map[int64]int{}
				for i := range reqs {
					job++
					l := lane.Batch
					if rapid.Bool().Draw(t, "immediate") {
						l = lane.Immediate
					}
					req := capacity.WindowRequest{Scope: "wl-scope", Holder: rapid.SampledFrom(holders).Draw(t, "holder"), Lane: l,
						Probe: rapid.IntRange(0, 9).Draw(t, "probe") == 0, JobID: job}
					if rapid.IntRange(0, 4).Draw(t, "deferred") == 0 {
						req.NotBefore = time.UnixMilli(clock.Load() + rapid.Int64Range(-1000, 5000).Draw(t, "not before"))
					}
					if rapid.IntRange(0, 3).Draw(t, "deadline") > 0 {
						req.Deadline = time.UnixMilli(clock.Load() + rapid.Int64Range(0, 60_000).Draw(t, "deadline ms"))
					}
					reqs[i], leased[job], index[job] = req, rapid.Bool().Draw(t, "lease"), i
				}
				answers := make([]gatherAnswer, n)
				calls := make([]func(), n)
				for i, req := range reqs {
					calls[i] = func() { answers[i] = gatherAsk(ctx, one, req, leased[req.JobID]) }
				}
				h.together(t, one.w, calls)
				batches := h.take()
				if n > 1 && len(batches) != 2 {
					t.Fatalf("step %d: %d acquires went in %d scripts, want 2 (the first alone, the rest together)", step, n, len(batches))
				}
				collect(step)
				for b, batch := range batches {
					for _, req := range batch {
						a2 := gatherAsk(ctx, two, req, leased[req.JobID])
						if a1 := answers[index[req.JobID]]; a1.String() != a2.String() {
							t.Fatalf("step %d: acquire %+v (lease %v) in script %d of %d: %v gathered, %v alone",
								step, req, leased[req.JobID], b+1, len(batches), a1, a2)
						}
					}
				}
			case 3, 4: // an answer gives a slot (and its lease) back
				hd := rapid.SampledFrom(holders).Draw(t, "holder")
				o := capacity.Outcome(rapid.IntRange(0, 3).Draw(t, "outcome"))
				lease := wgLease(hd)
				rel.want = append(rel.want, two.w.ReleaseWithLease(ctx, "wl-scope", hd, o, "test", 0, two.leases, two.leases.Restore(lease, true)))
				one.w.ReleaseLater(ctx, "wl-scope", hd, o, "test", 0, one.leases, one.leases.Restore(lease, true), rel.answered)
				if o == capacity.Overload || o == capacity.Refused {
					collect(step)
				}
			case 5: // time passes, or the vendor announces a cooldown
				one.w.Flush(ctx)
				collect(step)
				if rapid.Bool().Draw(t, "cooldown") {
					one.w.Cooldown(ctx, "wl-scope", "test", 0)
					two.w.Cooldown(ctx, "wl-scope", "test", 0)
				} else {
					clock.Add(rapid.Int64Range(1, 20_000).Draw(t, "ms"))
				}
			}
		}
		one.w.Flush(ctx)
		collect(-1)
		s1, err := one.w.State(ctx, "wl-scope")
		if err != nil {
			t.Fatal(err)
		}
		s2, err := two.w.State(ctx, "wl-scope")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(s1) != fmt.Sprint(s2) {
			t.Fatalf("windows differ at the end: %+v gathered, %+v alone", s1, s2)
		}
	})
}

// Eleven acquires of a scope arriving while one of its scripts is on its
// way cost Redis two scripts, not eleven, with the releases waiting in
// the process given back in the first; seventy cost three (at most 64
// acquires a script). Acquires of another scope go in scripts of their
// own.
func TestWindowGathersAcquiresIntoFewScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "wg-count")
	var scripts scriptCounter
	rdb.AddHook(&scripts)
	h := &gatherHold{}
	rig := newGatherRig(t, rdb, prefix, nil, 100, 100, time.Hour, h)
	acquire := func(scope, holder string) capacity.WindowGrant {
		return rig.w.Acquire(ctx, capacity.WindowRequest{Scope: scope, Holder: holder, Lane: lane.Immediate, Max: 100})
	}
	for _, s := range []string{"wg-a", "wg-b"} {
		if g := acquire(s, "warm"); !g.Granted || g.Uncounted {
			t.Fatalf("first acquire of %s: %+v", s, g)
		}
	}
	released := make(chan capacity.WindowRelease, 3)
	for i := range 3 {
		rig.w.ReleaseLater(ctx, "wg-a", "warm", capacity.Success, "", 100, nil, capacity.Lease{},
			func(r capacity.WindowRelease) { released <- r })
		if i == 0 {
			rig.w.ReleaseLater(ctx, "wg-b", "warm", capacity.Success, "", 100, nil, capacity.Lease{}, func(capacity.WindowRelease) {})
		}
	}
	h.take()
	for _, n := range []int{11, 70} {
		scripts.n.Store(0)
		grants := make([]capacity.WindowGrant, n)
		calls := make([]func(), n)
		for i := range calls {
			calls[i] = func() { grants[i] = acquire("wg-a", fmt.Sprintf("r%d-%d", n, i)) }
		}
		h.together(t, rig.w, calls)
		for i, g := range grants {
			if !g.Granted || g.Uncounted {
				t.Fatalf("%d together: acquire %d %+v, want granted and counted", n, i, g)
			}
		}
		var sizes []int
		for _, b := range h.take() {
			sizes = append(sizes, len(b))
		}
		wantSizes, wantScripts := "[1 10]", int64(2)
		if n == 70 {
			wantSizes, wantScripts = "[1 64 5]", 3
		}
		if fmt.Sprint(sizes) != wantSizes || scripts.n.Load() != wantScripts {
			t.Fatalf("%d acquires together went in batches %v and %d scripts, want %s and %d", n, sizes, scripts.n.Load(), wantSizes, wantScripts)
		}
	}
	for i := range 3 {
		select {
		case r := <-released:
			if r.Released != (i == 0) {
				t.Fatalf("release %d of warm's slot answered %+v, want released only by the first", i, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the releases waiting for the scope's acquire were not answered")
		}
	}
	if q := rig.w.Queued(); q != 1 {
		t.Fatalf("%d releases wait in the process, want 1 (wg-b's: no acquire of wg-b was made)", q)
	}
	st, err := rig.w.State(ctx, "wg-a")
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != 81 {
		t.Fatalf("wg-a has %d in flight, want 81 (the 81 acquires; warm given back)", st.InFlight)
	}
}

// When Redis cannot be reached, every acquire of a gathered script is
// granted uncounted, its lease too, and each counts as one operation
// that went ahead without Redis.
func TestWindowGatheredAcquiresFailOpen(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	h := &gatherHold{}
	rig := newGatherRig(t, dead, "wg-dead", func() int64 { return 1_800_000_000_000 }, 2, 1, time.Hour, h)
	ctx := context.Background()
	answers := make([]gatherAnswer, 6)
	calls := make([]func(), len(answers))
	for i := range calls {
		calls[i] = func() {
			answers[i] = gatherAsk(ctx, rig, capacity.WindowRequest{Scope: "wl-scope", Holder: fmt.Sprint("h", i), Lane: lane.Batch}, i%2 == 1)
		}
	}
	h.together(t, rig.w, calls)
	if b := h.take(); len(b) != 2 {
		t.Fatalf("%d scripts, want 2", len(b))
	}
	for i, a := range answers {
		if !a.g.Granted || !a.g.Uncounted || (i%2 == 1 && (!a.tried || !a.lg.Granted || !a.lg.Uncounted || a.counted)) {
			t.Fatalf("acquire %d: %v, want granted uncounted (its lease too)", i, a)
		}
	}
	if n := rig.w.Uncounted(); n != 6 {
		t.Fatalf("Uncounted = %d, want 6", n)
	}
}
