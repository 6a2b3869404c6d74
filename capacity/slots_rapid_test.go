package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// slotsModel is what Slots should hold: slots by ID and bindings by call,
// each with its expiry in (overridden) Redis time.
type slotsModel struct {
	now      time.Time
	slots    map[string]modelSlot
	bindings map[string]modelBinding
}

type modelSlot struct {
	campaign string
	exp      time.Time
}

type modelBinding struct {
	id  string
	exp time.Time
}

func (m *slotsModel) live(campaign string) (org, camp int) {
	for _, s := range m.slots {
		if s.exp.After(m.now) {
			org++
			if campaign != "" && s.campaign == campaign {
				camp++
			}
		}
	}
	return org, camp
}

// TestSlotsProperty runs random acquire/bind/release/release-call/advance
// sequences against real Redis and a model.
func TestSlotsProperty(t *testing.T) {
	t.Parallel()
	rdb, _ := testredis.New(t, "capacity")
	ctx := context.Background()
	const orgLimit = 3
	campLimits := map[string]int{"a": 2, "b": 3, "": 0} // "b" gets the default, lowered to the org's cap
	rapid.Check(t, func(rt *rapid.T) {
		prefix := testredis.UniquePrefix("capacity", t.Name())
		defer testredis.DeleteKeys(rdb, prefix)
		s, err := capacity.NewSlots(captest.OnRedis(rt, rdb, prefix), capacity.SlotsConfig{
			Orgs: map[string]capacity.OrgSlots{"acme": {Limit: orgLimit, Campaigns: map[string]int{"a": 2}}}})
		if err != nil {
			rt.Fatal(err)
		}
		m := &slotsModel{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), slots: map[string]modelSlot{}, bindings: map[string]modelBinding{}}
		capacity.SetSlotsNowForTest(s, m.now)
		var unbound []capacity.Slot // acquired, never bound, not released
		calls := rapid.SampledFrom([]string{"c1", "c2", "c3"})

		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				camp := rapid.SampledFrom([]string{"a", "b", ""}).Draw(rt, "campaign")
				orgN, campN := m.live(camp)
				sl, err := s.Acquire(ctx, "acme", camp, 0, 0)
				if orgN < orgLimit && (camp == "" || campN < campLimits[camp]) {
					if err != nil {
						rt.Fatalf("Acquire(%q) with org %d/%d campaign %d/%d: %v", camp, orgN, orgLimit, campN, campLimits[camp], err)
					}
					m.slots[sl.ID] = modelSlot{campaign: camp, exp: m.now.Add(capacity.StaleAfterDefault)}
					unbound = append(unbound, sl)
					return
				}
				want := &capacity.NoSlotError{Org: "acme", Campaign: camp, OrgInUse: orgN, OrgLimit: orgLimit, CampaignInUse: campN, CampaignLimit: campLimits[camp]}
				var ns *capacity.NoSlotError
				if !errors.As(err, &ns) || *ns != *want {
					rt.Fatalf("Acquire(%q) = %v, want %v", camp, err, want)
				}
			},
			"bind": func(rt *rapid.T) {
				if len(unbound) == 0 {
					rt.Skip("no unbound slot")
				}
				i := rapid.IntRange(0, len(unbound)-1).Draw(rt, "slot")
				sl := unbound[i]
				unbound = append(unbound[:i], unbound[i+1:]...)
				call := calls.Draw(rt, "call")
				err := sl.Bind(ctx, call)
				if !m.slots[sl.ID].exp.After(m.now) {
					if !errors.Is(err, capacity.ErrSlotNotHeld) {
						rt.Fatalf("Bind of a stale slot to %s = %v, want ErrSlotNotHeld", call, err)
					}
					return
				}
				if b, ok := m.bindings[call]; ok && b.exp.After(m.now) {
					if !errors.Is(err, capacity.ErrAlreadyBound) {
						rt.Fatalf("Bind to bound call %s = %v, want ErrAlreadyBound", call, err)
					}
					delete(m.slots, sl.ID)
					return
				}
				if err != nil {
					rt.Fatalf("Bind(%s): %v", call, err)
				}
				m.bindings[call] = modelBinding{id: sl.ID, exp: m.slots[sl.ID].exp}
			},
			"release": func(rt *rapid.T) {
				if len(unbound) == 0 {
					rt.Skip("no unbound slot")
				}
				i := rapid.IntRange(0, len(unbound)-1).Draw(rt, "slot")
				sl := unbound[i]
				unbound = append(unbound[:i], unbound[i+1:]...)
				if err := sl.Release(ctx); err != nil {
					rt.Fatal(err)
				}
				delete(m.slots, sl.ID)
			},
			"releaseCall": func(rt *rapid.T) {
				call := calls.Draw(rt, "call")
				err := s.ReleaseCall(ctx, "acme", call)
				b, ok := m.bindings[call]
				// The binding's key expires with its slot: after that, or
				// once released, the call is not bound.
				if !ok || !b.exp.After(m.now) {
					if !errors.Is(err, capacity.ErrNotBound) {
						rt.Fatalf("ReleaseCall(%s) without a live binding = %v, want ErrNotBound", call, err)
					}
					delete(m.bindings, call)
					return
				}
				if err != nil {
					rt.Fatalf("ReleaseCall(%s): %v", call, err)
				}
				delete(m.slots, b.id)
				delete(m.bindings, call)
			},
			"advance": func(rt *rapid.T) {
				d := time.Duration(rapid.Int64Range(0, int64(25*time.Minute/time.Millisecond)).Draw(rt, "ms")) * time.Millisecond
				m.now = m.now.Add(d)
				capacity.SetSlotsNowForTest(s, m.now)
			},
			"": func(rt *rapid.T) {
				orgN, _ := m.live("")
				n, err := s.LiveCalls(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				if n != orgN {
					rt.Fatalf("LiveCalls = %d, model %d (%s)", n, orgN, fmt.Sprint(m.slots))
				}
			},
		})
	})
}
