package capacity_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/testredis"
)

// leaseModel is the lease scripts' specification: a lease is alive while
// its expiry is after now.
type leaseModel struct {
	now     int64
	expiry  map[string]int64 // lease id → expiry ms, alive or not yet trimmed
	owner   map[string]int   // lease id → process index
	limit   int
	reserve int
	length  int64
}

func (m *leaseModel) alive() int {
	n := 0
	for _, e := range m.expiry {
		if e > m.now {
			n++
		}
	}
	return n
}

// TestLeaseScriptsProperty runs random interleavings of acquire, refresh,
// release, crash (a process stops heart-beating and forgets its leases)
// and Redis time advancing (WithTestNow), against leaseModel.
func TestLeaseScriptsProperty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testredis.Client(t)
	base := testredis.Prefix(t, rdb, "capacity")
	var run atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		prefix := fmt.Sprintf("%s:%d", base, run.Add(1))
		defer testredis.DeleteKeys(rdb, prefix)
		clk := newLeaseClock()
		m := &leaseModel{now: clk.Now().UnixMilli(), expiry: map[string]int64{}, owner: map[string]int{},
			limit: rapid.IntRange(0, 4).Draw(rt, "limit"), reserve: rapid.IntRange(0, 2).Draw(rt, "reserve"), length: 1000}
		r := captest.OnRedis(rt, rdb, prefix)
		cfg := capacity.WithTestNow(capacity.Config{LeaseSTT: time.Second, HeartbeatEvery: 100 * time.Millisecond,
			Limits: map[string]capacity.ProviderLimit{"p/stt": {Limit: m.limit, BatchReserve: m.reserve}}}, millis(clk))
		newProc := func() *capacity.Leases {
			l, err := capacity.New(r, cfg)
			if err != nil {
				rt.Fatal(err)
			}
			return l
		}
		procs := []*capacity.Leases{newProc(), newProc(), newProc()}
		var released []capacity.Lease

		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				p := rapid.IntRange(0, len(procs)-1).Draw(rt, "proc")
				ln := rapid.SampledFrom([]capacity.Lane{lane.Live, lane.Batch}).Draw(rt, "lane")
				for id, e := range m.expiry { // the script trims first
					if e <= m.now {
						delete(m.expiry, id)
					}
				}
				capN := m.limit
				if ln == lane.Batch {
					capN -= m.reserve
				}
				inUse := len(m.expiry)
				want := inUse < capN
				lease, g := procs[p].Acquire(ctx, capacity.Request{Provider: "p", Kind: capacity.KindSTT, Holder: "h", Lane: ln})
				if want {
					inUse++
				}
				if g != (capacity.Grant{Granted: want, InUse: inUse, Limit: m.limit}) {
					rt.Fatalf("acquire on %v lane, model in use %d cap %d: got %+v", ln, len(m.expiry), capN, g)
				}
				if want {
					if lease.Expires.UnixMilli() != m.now+m.length {
						rt.Fatalf("lease expires %d, want %d", lease.Expires.UnixMilli(), m.now+m.length)
					}
					m.expiry[lease.ID], m.owner[lease.ID] = m.now+m.length, p
				}
			},
			"refresh": func(rt *rapid.T) {
				p := rapid.IntRange(0, len(procs)-1).Draw(rt, "proc")
				wantLost := map[string]bool{}
				for id, o := range m.owner {
					if o != p {
						continue
					}
					if e, ok := m.expiry[id]; ok && e > m.now {
						m.expiry[id] = m.now + m.length
					} else {
						wantLost[id] = true
						delete(m.expiry, id)
						delete(m.owner, id)
					}
				}
				res := procs[p].RefreshHeld(ctx)
				if res.Failed || len(res.Lost) != len(wantLost) {
					rt.Fatalf("refresh: got %+v, want lost %v", res, wantLost)
				}
				for _, x := range res.Lost {
					if !wantLost[x.ID] {
						rt.Fatalf("refresh lost %s, want lost %v", x.ID, wantLost)
					}
				}
				for _, x := range res.Refreshed {
					if x.Expires.UnixMilli() != m.expiry[x.ID] {
						rt.Fatalf("refreshed %s to %d, model %d", x.ID, x.Expires.UnixMilli(), m.expiry[x.ID])
					}
				}
			},
			"release": func(rt *rapid.T) {
				p := rapid.IntRange(0, len(procs)-1).Draw(rt, "proc")
				held := procs[p].Held()
				if len(held) == 0 {
					rt.Skip("nothing held")
				}
				x := rapid.SampledFrom(held).Draw(rt, "lease")
				procs[p].Release(ctx, x)
				delete(m.expiry, x.ID)
				delete(m.owner, x.ID)
				released = append(released, x)
			},
			"release again": func(rt *rapid.T) {
				if len(released) == 0 {
					rt.Skip("nothing released")
				}
				x := rapid.SampledFrom(released).Draw(rt, "lease")
				procs[0].Release(ctx, x) // idempotent, even from another process
			},
			"crash": func(rt *rapid.T) {
				p := rapid.IntRange(0, len(procs)-1).Draw(rt, "proc")
				procs[p] = newProc() // its leases stay in Redis until they expire
				for id, o := range m.owner {
					if o == p {
						m.owner[id] = -1
					}
				}
			},
			"advance": func(rt *rapid.T) {
				d := rapid.Int64Range(0, 1500).Draw(rt, "ms")
				clk.Advance(time.Duration(d) * time.Millisecond)
				m.now += d
			},
			"": func(rt *rapid.T) { // invariant, after every action
				sts, err := procs[0].Status(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				if got, want := sts[0].InUse, m.alive(); got != want || got > max(m.limit, 0) {
					rt.Fatalf("in use %d, model %d, limit %d", got, want, m.limit)
				}
			},
		})
	})
}
