package capacity_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// Another organisation cannot release a call of acme, even knowing its id:
// acme keeps its slot and stays held to its cap.
func TestSlotsReleaseCallOtherOrg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{OrgLimit: 1})

	a, err := s.Acquire(ctx, "acme", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Bind(ctx, "call-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseCall(ctx, "rival", "call-1"); !errors.Is(err, capacity.ErrNotBound) {
		t.Fatalf("rival's ReleaseCall of acme's call = %v, want ErrNotBound", err)
	}
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("acme's second call after rival's release = %v, want ErrNoSlot (cap 1)", err)
	}
	// The rival's own call of the same id does not meet acme's.
	r, err := s.Acquire(ctx, "rival", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Bind(ctx, "call-1"); err != nil {
		t.Fatalf("rival's Bind of its own call-1: %v", err)
	}
	if err := s.ReleaseCall(ctx, "rival", "call-1"); err != nil {
		t.Fatalf("rival's ReleaseCall of its own call: %v", err)
	}
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("acme after rival released its own call-1 = %v, want ErrNoSlot", err)
	}
	if err := s.ReleaseCall(ctx, "acme", "call-1"); err != nil {
		t.Fatalf("acme's ReleaseCall: %v", err)
	}
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); err != nil {
		t.Fatalf("acme after its own release: %v", err)
	}
}

// A slot a holder made up cannot take a call; a real one binds for the
// life Redis gave it, whatever the holder claims.
func TestSlotsBindChecksRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{OrgLimit: 2})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	capacity.SetSlotsNowForTest(s, now)

	forged := s.Restore("acme", "", "0123456789abcdef0123456789abcdef", false)
	if err := forged.Bind(ctx, "victim"); !errors.Is(err, capacity.ErrSlotNotHeld) {
		t.Fatalf("Bind of a made-up slot = %v, want ErrSlotNotHeld", err)
	}
	// A real slot of another campaign, or another organisation, does not
	// pass for one of this campaign or organisation.
	real, err := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range []capacity.Slot{s.Restore("acme", "autumn", real.ID, false), s.Restore("rival", "", real.ID, false)} {
		if err := sl.Bind(ctx, "victim"); !errors.Is(err, capacity.ErrSlotNotHeld) {
			t.Fatalf("Bind of %s/%s = %v, want ErrSlotNotHeld", sl.Org, sl.Campaign, err)
		}
	}
	if err := s.Restore("acme", "spring", real.ID, false).Bind(ctx, "victim"); err != nil {
		t.Fatalf("Bind of the restored real slot: %v", err)
	}
	if ttl := rdb.PTTL(ctx, prefix+":{acme}:call:victim").Val(); ttl <= 0 || ttl > capacity.StaleAfterDefault {
		t.Fatalf("binding TTL = %s, want at most the slot's %s", ttl, capacity.StaleAfterDefault)
	}
	// Once the slot is stale the call is free for another slot.
	capacity.SetSlotsNowForTest(s, now.Add(capacity.StaleAfterDefault))
	next, err := s.Acquire(ctx, "acme", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Bind(ctx, "victim"); err != nil {
		t.Fatalf("Bind after the first slot went stale: %v", err)
	}
}

func TestSlotsIDsValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	s := newTestSlots(t, captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{})
	long := strings.Repeat("a", 60<<10)
	for _, tc := range []struct {
		name, org, campaign, field string
	}{
		{"org closing the hash tag", "x}:camp:y", "", "org"},
		{"60 KB org", long, "", "org"},
		{"empty org", "", "", "org"},
		{"org of 129", strings.Repeat("o", capacity.IDMaxLen+1), "", "org"},
		{"campaign with a colon", "acme", "a:b", "campaign"},
		{"60 KB campaign", "acme", long, "campaign"},
	} {
		_, err := s.Acquire(ctx, tc.org, tc.campaign, 0, 0)
		var ie *capacity.IDError
		if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, capacity.ErrInvalidID) || len(err.Error()) > 200 {
			t.Errorf("%s: Acquire error = %.200v, want a short IDError for %s", tc.name, err, tc.field)
		}
	}
	if _, err := s.Acquire(ctx, strings.Repeat("o", capacity.IDMaxLen), "Spring_2026.v-1", 0, 0); err != nil {
		t.Fatalf("Acquire with a 128-byte org: %v", err)
	}
	sl, err := s.Acquire(ctx, "acme", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ie *capacity.IDError
	if err := sl.Bind(ctx, "c}x"); !errors.As(err, &ie) || ie.Field != "call_id" {
		t.Fatalf("Bind of call c}x = %v, want IDError call_id", err)
	}
	if err := s.ReleaseCall(ctx, "x}:camp:y", "c"); !errors.As(err, &ie) || ie.Field != "org" {
		t.Fatalf("ReleaseCall org x}:camp:y = %v, want IDError org", err)
	}
	if err := s.ReleaseCall(ctx, "acme", long); !errors.As(err, &ie) || ie.Field != "call_id" {
		t.Fatalf("ReleaseCall 60 KB call = %.200v, want IDError call_id", err)
	}
	if err := s.Restore("acme", "", "a b", false).Release(ctx); !errors.As(err, &ie) || ie.Field != "slot.id" {
		t.Fatalf("Release of slot id a b = %v, want IDError slot.id", err)
	}
	if _, err := capacity.NewSlots(captest.OnRedis(t, rdb, ""), capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"x}:camp:y": {}}}); !errors.Is(err, capacity.ErrInvalidID) {
		t.Fatalf("NewSlots with org x}:camp:y = %v, want ErrInvalidID", err)
	}
	if _, err := capacity.NewSlots(captest.OnRedis(t, rdb, ""), capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Campaigns: map[string]int{"{c}": 1}}}}); !errors.Is(err, capacity.ErrInvalidID) {
		t.Fatalf("NewSlots with campaign {c} = %v, want ErrInvalidID", err)
	}
}

// scriptCounter counts the scripts a client runs; a script not loaded
// yet, sent again with its body, counts once.
type scriptCounter struct{ n atomic.Int64 }

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			c.n.Add(1)
		}
		return err
	}
}
func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A wait asking to retry every millisecond retries no more often than
// RetryIntervalMin: over a 300ms wait, at most 1 + 300/50 tries.
func TestSlotsRetryIntervalFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	cfg := capacity.SlotsConfig{OrgLimit: 1}
	holder := newTestSlots(t, captest.OnRedis(t, rdb, prefix), cfg)
	if _, err := holder.Acquire(ctx, "acme", "", 0, 0); err != nil {
		t.Fatal(err)
	}
	counted, err := testredis.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = counted.Close() })
	var c scriptCounter
	counted.AddHook(&c)
	s := newTestSlots(t, captest.OnRedis(t, counted, prefix), cfg)
	const wait = 300 * time.Millisecond
	if _, err := s.Acquire(ctx, "acme", "", wait, time.Millisecond); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("Acquire = %v, want ErrNoSlot", err)
	}
	// Each try is one EVALSHA, plus one EVAL the first time the script is
	// not yet loaded.
	limit := int64(1+wait/capacity.RetryIntervalMin) + 1
	if n := c.n.Load(); n < 2 || n > limit {
		t.Fatalf("%d scripts run over a %s wait with retry 1ms, want 2–%d (retry raised to %s)", n, wait, limit, capacity.RetryIntervalMin)
	}
}
