package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// callerIDModel is what one organisation's pool should hold, in
// (overridden) Redis time.
type callerIDModel struct {
	now     time.Time
	numbers map[string]*modelNumber
}

type modelNumber struct {
	busySince time.Time // zero: free
	lastFreed time.Time // zero: never used
	token     string
	call      string
}

// reclaim frees every number busy for StaleAfterDefault or longer.
func (m *callerIDModel) reclaim() {
	for _, n := range m.numbers {
		if !n.busySince.IsZero() && !m.now.Before(n.busySince.Add(capacity.StaleAfterDefault)) {
			*n = modelNumber{lastFreed: m.now}
		}
	}
}

// next is the number Acquire must take: the free one freed longest ago,
// the lowest on a tie; "" when none is free.
func (m *callerIDModel) next() string {
	best := ""
	for num, n := range m.numbers {
		if !n.busySince.IsZero() {
			continue
		}
		if best == "" || n.lastFreed.Before(m.numbers[best].lastFreed) ||
			(n.lastFreed.Equal(m.numbers[best].lastFreed) && num < best) {
			best = num
		}
	}
	return best
}

func (m *callerIDModel) busy() int {
	b := 0
	for _, n := range m.numbers {
		if !n.busySince.IsZero() {
			b++
		}
	}
	return b
}

// TestCallerIDsProperty runs random add/remove/acquire/release/advance
// sequences against real Redis and a model: Acquire takes exactly the
// number the model picks, never one held, a released or stale number comes
// back, a stale token frees nothing, and List agrees with the model.
func TestCallerIDsProperty(t *testing.T) {
	t.Parallel()
	rdb, _ := testredis.New(t, "capacity")
	ctx := context.Background()
	universe := []string{"+4930100001", "+4930100002", "+4930100003", "+4930100004", "+4930100005"}
	rapid.Check(t, func(rt *rapid.T) {
		prefix := testredis.UniquePrefix("capacity", t.Name())
		defer testredis.DeleteKeys(rdb, prefix)
		c, err := capacity.NewCallerIDs(captest.OnRedis(rt, rdb, prefix), capacity.CallerIDsConfig{})
		if err != nil {
			rt.Fatal(err)
		}
		m := &callerIDModel{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), numbers: map[string]*modelNumber{}}
		capacity.SetCallerIDsNowForTest(c, m.now)
		var grants []capacity.CallerID // every grant so far, stale ones too
		calls := 0

		rt.Repeat(map[string]func(*rapid.T){
			"add": func(rt *rapid.T) {
				nums := rapid.SliceOfNDistinct(rapid.SampledFrom(universe), 1, 3, rapid.ID[string]).Draw(rt, "numbers")
				want := 0
				for _, n := range nums {
					if m.numbers[n] == nil {
						m.numbers[n] = &modelNumber{}
						want++
					}
				}
				if got, err := c.Add(ctx, "acme", nums...); err != nil || got != want {
					rt.Fatalf("Add(%v) = %d, %v; want %d", nums, got, err, want)
				}
			},
			"remove": func(rt *rapid.T) {
				nums := rapid.SliceOfNDistinct(rapid.SampledFrom(universe), 1, 2, rapid.ID[string]).Draw(rt, "numbers")
				force := rapid.Bool().Draw(rt, "force")
				var busy []string
				want := 0
				for _, num := range nums {
					n := m.numbers[num]
					if n == nil {
						continue
					}
					want++
					if !n.busySince.IsZero() && m.now.Before(n.busySince.Add(capacity.StaleAfterDefault)) {
						busy = append(busy, num)
					}
				}
				got, err := c.Remove(ctx, "acme", force, nums...)
				if len(busy) > 0 && !force {
					var be *capacity.CallerIDBusyError
					if !errors.As(err, &be) || fmt.Sprint(be.Numbers) != fmt.Sprint(busy) {
						rt.Fatalf("Remove(%v) with %v busy = %d, %v; want CallerIDBusyError", nums, busy, got, err)
					}
					return
				}
				if err != nil || got != want {
					rt.Fatalf("Remove(%v, force %v) = %d, %v; want %d", nums, force, got, err, want)
				}
				for _, num := range nums {
					delete(m.numbers, num)
				}
			},
			"acquire": func(rt *rapid.T) {
				m.reclaim()
				want := m.next()
				calls++
				call := fmt.Sprintf("call-%d", calls)
				got, err := c.Acquire(ctx, "acme", call)
				if want == "" {
					var none *capacity.NoCallerIDError
					if !errors.As(err, &none) || none.Busy != m.busy() || none.Total != len(m.numbers) {
						rt.Fatalf("Acquire with none free (%d/%d busy) = %+v, %v; want NoCallerIDError", m.busy(), len(m.numbers), got, err)
					}
					return
				}
				if err != nil || got.Number != want || !got.Since.Equal(m.now) {
					rt.Fatalf("Acquire = %+v, %v; want %s since %s", got, err, want, m.now)
				}
				*m.numbers[want] = modelNumber{busySince: m.now, token: got.Token, call: call, lastFreed: m.numbers[want].lastFreed}
				grants = append(grants, got)
			},
			"release": func(rt *rapid.T) {
				if len(grants) == 0 {
					rt.Skip("nothing granted yet")
				}
				g := rapid.SampledFrom(grants).Draw(rt, "grant")
				n := m.numbers[g.Number]
				wantFreed := n != nil && !n.busySince.IsZero() && n.token == g.Token
				freed, err := c.Release(ctx, "acme", g.Number, g.Token)
				if err != nil || freed != wantFreed {
					rt.Fatalf("Release(%s, %s) = %v, %v; want %v", g.Number, g.CallID, freed, err, wantFreed)
				}
				if wantFreed {
					*n = modelNumber{lastFreed: m.now}
				}
			},
			"advance": func(rt *rapid.T) {
				d := time.Duration(rapid.Int64Range(1, 25*60).Draw(rt, "seconds")) * time.Second
				m.now = m.now.Add(d)
				capacity.SetCallerIDsNowForTest(c, m.now)
			},
			"": func(rt *rapid.T) {
				l, err := c.List(ctx, "acme")
				if err != nil {
					rt.Fatal(err)
				}
				nums := make([]string, 0, len(m.numbers))
				for num := range m.numbers {
					nums = append(nums, num)
				}
				sort.Strings(nums)
				if len(l) != len(nums) {
					rt.Fatalf("List has %d numbers, model %d: %v", len(l), len(nums), l)
				}
				for i, num := range nums {
					n := m.numbers[num]
					want := capacity.CallerIDState{Number: num, State: capacity.CallerIDFree}
					if !n.busySince.IsZero() {
						want = capacity.CallerIDState{Number: num, State: capacity.CallerIDBusy, BusySince: n.busySince, CallID: n.call}
						if !m.now.Before(n.busySince.Add(capacity.StaleAfterDefault)) {
							want.State = capacity.CallerIDStale
						}
					}
					if l[i] != want {
						rt.Fatalf("List[%d] = %+v, model %+v", i, l[i], want)
					}
				}
			},
		})
	})
}
