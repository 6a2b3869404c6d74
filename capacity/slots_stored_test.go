package capacity_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// Stored caps lay over the configured ones entry by entry; a later call
// replaces the earlier one whole; a bad entry changes nothing.
func TestSlotsStoredCaps(t *testing.T) {
	t.Parallel()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{
		Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 8, Campaigns: map[string]int{"spring": 6, "autumn": 4}}}})
	type limits struct{ org, campaign int }
	check := func(step, org, campaign string, want limits) {
		t.Helper()
		if o, c := s.Limits(org, campaign); o != want.org || c != want.campaign {
			t.Errorf("%s: Limits(%s, %s) = %d, %d, want %d, %d", step, org, campaign, o, c, want.org, want.campaign)
		}
	}
	check("configured", "acme", "spring", limits{8, 6})
	if err := s.SetStoredCaps(map[string]capacity.OrgSlots{
		"acme":  {Limit: 5, Campaigns: map[string]int{"autumn": 2}},
		"rival": {Limit: 30, Campaigns: map[string]int{"x": 20}},
	}); err != nil {
		t.Fatal(err)
	}
	check("stored org cap", "acme", "", limits{5, 0})
	check("configured campaign above the stored org cap is lowered", "acme", "spring", limits{5, 5})
	check("stored campaign", "acme", "autumn", limits{5, 2})
	check("unlisted campaign", "acme", "other", limits{5, capacity.CampaignLimitDefault})
	check("stored org only", "rival", "x", limits{30, 20})
	check("unlisted org", "nobody", "", limits{capacity.OrgLimitDefault, 0})

	for _, bad := range []map[string]capacity.OrgSlots{
		{"acme": {Limit: capacity.OrgLimitMax + 1}},
		{"acme": {Limit: -1}},
		{"acme": {Campaigns: map[string]int{"spring": capacity.CampaignLimitMax + 1}}},
		{"acme": {Campaigns: map[string]int{"spring": 0}}},
		{"x}y": {Limit: 1}},
		{"acme": {Campaigns: map[string]int{"a:b": 1}}},
	} {
		if err := s.SetStoredCaps(bad); err == nil || !strings.Contains(err.Error(), "stored caps[") {
			t.Errorf("SetStoredCaps(%v) = %v, want an error naming the entry", bad, err)
		}
	}
	check("after refused caps", "acme", "autumn", limits{5, 2})

	if err := s.SetStoredCaps(nil); err != nil {
		t.Fatal(err)
	}
	check("stored caps gone", "acme", "spring", limits{8, 6})
	check("stored caps gone", "rival", "x", limits{capacity.OrgLimitDefault, capacity.CampaignLimitDefault})
}

// A cap raised at run time admits the call the old one refused, and a cap
// lowered refuses the next; swaps racing with acquires are safe (go test
// -race).
func TestSlotsStoredCapsApplyToAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{OrgLimit: 1})
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("second call at cap 1 = %v, want ErrNoSlot", err)
	}
	if err := s.SetStoredCaps(map[string]capacity.OrgSlots{"acme": {Limit: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); err != nil {
		t.Fatalf("second call at cap 2: %v", err)
	}
	if err := s.SetStoredCaps(map[string]capacity.OrgSlots{"acme": {Limit: 1}}); err != nil {
		t.Fatal(err)
	}
	var nsl *capacity.NoSlotError
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); !errors.As(err, &nsl) || nsl.OrgLimit != 1 || nsl.OrgInUse != 2 {
		t.Fatalf("third call after lowering to 1 = %v, want NoSlotError 2/1", err)
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			_ = s.SetStoredCaps(map[string]capacity.OrgSlots{"racer": {Limit: 1 + i%3, Campaigns: map[string]int{"c": 1}}})
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if o, c := s.Limits("racer", "c"); o < 1 || o > 10 || c != 1 && c != capacity.CampaignLimitDefault {
					t.Errorf("Limits during swaps = %d, %d", o, c)
					return
				}
			}
		})
	}
	wg.Wait()
}
