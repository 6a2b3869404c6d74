package capacity_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// Not parallel: goleak must see only this test's goroutines.
func TestHeartbeatRefreshesAndReportsLost(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 5}, "acme/tts": {Limit: 5}}})
	l := b.leases
	a, _ := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "a"})
	v, _ := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindTTS, Holder: "a"})

	tick := make(chan time.Time)
	beats := make(chan capacity.RefreshResult)
	lost := make(chan capacity.Lease, 4)
	hb := l.StartHeartbeat(ctx, capacity.WithTestTick(capacity.HeartbeatConfig{
		OnLost: func(x capacity.Lease) { lost <- x },
	}, tick, func(r capacity.RefreshResult) { beats <- r }))
	defer hb.Stop()

	beat := func() capacity.RefreshResult {
		t.Helper()
		tick <- time.Time{}
		select {
		case r := <-beats:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no beat within 10s")
			return capacity.RefreshResult{}
		}
	}
	b.clock.Advance(20 * time.Second)
	if r := beat(); len(r.Refreshed) != 2 || len(r.Lost) != 0 {
		t.Fatalf("first beat %+v, want both refreshed", r)
	}
	for _, h := range l.Held() {
		if h.ID == v.ID && !h.Expires.Equal(b.clock.Now().Add(capacity.LeaseTTSDefault)) {
			t.Fatalf("held %+v not extended", h)
		}
	}
	// The voice lease vanishes (as if it had lapsed and been trimmed).
	if err := b.rdb.ZRem(ctx, b.prefix+":{acme/tts}:leases", v.ID).Err(); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(20 * time.Second)
	if r := beat(); len(r.Refreshed) != 1 || len(r.Lost) != 1 {
		t.Fatalf("second beat %+v, want one lost", r)
	}
	if got := <-lost; got.ID != v.ID {
		t.Fatalf("OnLost(%+v), want %s", got, v.ID)
	}
	if held := l.Held(); len(held) != 1 || held[0].ID != a.ID {
		t.Fatalf("Held %+v, want only %s", held, a.ID)
	}
	hb.Stop()
	hb.Stop() // idempotent
}

// The real ticker keeps a lease alive well past its length.
func TestHeartbeatRealTicker(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	rdb := testredis.Client(t)
	l, err := capacity.New(captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "capacity")), capacity.Config{
		Limits:   map[string]capacity.ProviderLimit{"acme/stt": {Limit: 1}},
		LeaseSTT: 300 * time.Millisecond, HeartbeatEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lease, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT})
	if !g.Granted {
		t.Fatal("not granted")
	}
	hb := l.StartHeartbeat(ctx, capacity.HeartbeatConfig{OnLost: func(x capacity.Lease) { t.Errorf("lost %+v", x) }})
	defer hb.Stop()
	// Wait (polling, bounded) until the held lease's expiry has moved past
	// twice the original lease length.
	deadline := time.Now().Add(10 * time.Second)
	for {
		held := l.Held()
		if len(held) == 1 && held[0].Expires.After(lease.Expires.Add(600*time.Millisecond)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not kept alive: held %+v, acquired %+v", held, lease)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT}); g.Granted {
		t.Fatalf("second acquire granted %+v; the kept-alive lease should hold the only slot", g)
	}
	hb.Stop()
	l.Release(ctx, lease)
}
