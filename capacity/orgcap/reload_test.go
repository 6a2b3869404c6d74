package orgcap_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
)

// within is how long a test waits for a Reloader to apply a change: far
// above its 50ms period, so that a busy machine does not fail it.
const within = 15 * time.Second

// poll is a signal that fires every 20ms until the test ends: what a test
// waits on while a Reloader polls the database.
func poll(t *testing.T) <-chan time.Time {
	tk := time.NewTicker(20 * time.Millisecond)
	t.Cleanup(tk.Stop)
	return tk.C
}

// Two processes' Slots over one Redis, each fed by its own Reloader: a
// call refused at the old cap is admitted once the cap is raised in the
// database, by either process, without a restart; lowered again, the next
// call is refused. The configured caps stand until a cap is stored.
func TestReloaderAppliesStoredCapsWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := setup(t)
	rdb, prefix := testredis.New(t, "orgcap")
	cfg := capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 1}}}
	var slots [2]*capacity.Slots
	for i := range slots {
		s, err := capacity.NewSlots(captest.OnRedis(t, rdb, prefix), cfg)
		if err != nil {
			t.Fatal(err)
		}
		slots[i] = s
		r, err := orgcap.NewReloader(store, s, orgcap.ReloaderConfig{Every: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Start(ctx))
	}
	a, b := slots[0], slots[1]
	if _, err := a.Acquire(ctx, "acme", "", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "acme", "", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("second call at the configured cap 1 = %v, want ErrNoSlot", err)
	}
	if _, err := store.Set(ctx, orgcap.Update{Org: "acme", Limit: 2, Reason: "busy day", By: "test"}); err != nil {
		t.Fatal(err)
	}
	var second capacity.Slot
	if !testwait.Until(within, poll(t), func() bool {
		sl, err := b.Acquire(ctx, "acme", "", 0, 0)
		second = sl
		return err == nil
	}) {
		t.Fatalf("the second call is still refused %s after the cap was raised to 2", within)
	}
	if !testwait.Until(within, poll(t), func() bool { o, _ := a.Limits("acme", ""); return o == 2 }) {
		t.Fatal("the other process did not apply cap 2")
	}
	if _, err := a.Acquire(ctx, "acme", "", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("third call at cap 2 = %v, want ErrNoSlot", err)
	}
	// Lowered to 1: with one call ended, the next is still refused.
	if _, err := store.Set(ctx, orgcap.Update{Org: "acme", Limit: 1, By: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if !testwait.Until(within, poll(t), func() bool { o, _ := s.Limits("acme", ""); return o == 1 }) {
			t.Fatal("a process did not apply cap 1")
		}
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var full *capacity.NoSlotError
	if _, err := b.Acquire(ctx, "acme", "", 0, 0); !errors.As(err, &full) || full.OrgLimit != 1 || full.OrgInUse != 1 {
		t.Fatalf("a call after lowering to 1 with one live = %v, want NoSlotError 1/1", err)
	}

	// A campaign cap set at run time applies too.
	if _, err := store.Set(ctx, orgcap.Update{Org: "acme", Limit: 5, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Set(ctx, orgcap.Update{Org: "acme", Campaign: "spring", Limit: 3, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(within, poll(t), func() bool { o, c := b.Limits("acme", "spring"); return o == 5 && c == 3 }) {
		t.Fatal("the campaign cap did not reach the process")
	}
}

// With the database unreachable the caps read last stand, and acquiring a
// slot does not wait for the database.
func TestReloaderKeepsTheLastCapsWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := testdb.New(t)
	writer := orgcap.New(testdb.AsRuntime(t, owner))
	if _, err := writer.Set(ctx, orgcap.Update{Org: "acme", Limit: 3, By: "test"}); err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testredis.New(t, "orgcap")
	s, err := capacity.NewSlots(captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	readerPool, err := pgxpool.New(ctx, testdb.URLOf(t, owner))
	if err != nil {
		t.Fatal(err)
	}
	r, err := orgcap.NewReloader(orgcap.New(readerPool), s, orgcap.ReloaderConfig{Every: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := r.Start(ctx)
	defer stop()
	if o, _ := s.Limits("acme", ""); o != 3 {
		t.Fatalf("after Start: cap %d, want the stored 3", o)
	}
	readerPool.Close() // the reloader's database is gone
	if _, err := writer.Set(ctx, orgcap.Update{Org: "acme", Limit: 4, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err == nil {
		t.Fatal("Load on a closed pool succeeded")
	}
	start := time.Now()
	for range 3 {
		if _, err := s.Acquire(ctx, "acme", "", 0, 0); err != nil {
			t.Fatalf("acquire without the database: %v", err)
		}
	}
	if _, err := s.Acquire(ctx, "acme", "", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("fourth call at the last known cap 3 = %v, want ErrNoSlot", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("four acquires took %s without the database", d)
	}
	if o, _ := s.Limits("acme", ""); o != 3 {
		t.Fatalf("without the database: cap %d, want the last known 3", o)
	}
}
