package capacity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/testredis"
)

// leaseBundle is what a lease test needs.
type leaseBundle struct {
	rdb    *redis.Client
	prefix string
	clock  *clock.Stub
	logs   *leaseLogs
	leases *capacity.Leases
	cfg    capacity.Config
}

// leaseSetup returns Leases over a fresh key prefix whose script clock is
// the bundle's clock (WithTestNow); cfg's Redis, KeyPrefix, Logger and Clock
// are filled in.
func leaseSetup(t *testing.T, cfg capacity.Config) *leaseBundle {
	t.Helper()
	b := &leaseBundle{rdb: testredis.Client(t), clock: newLeaseClock(), logs: &leaseLogs{}}
	b.prefix = testredis.Prefix(t, b.rdb, "capacity")
	cfg.Redis, cfg.KeyPrefix, cfg.Logger, cfg.Clock = b.rdb, b.prefix, b.logs.logger(), b.clock
	b.cfg = capacity.WithTestNow(cfg, millis(b.clock))
	l, err := capacity.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.leases = l
	return b
}

// zcard returns how many members provider/kind's lease set has.
func (b *leaseBundle) zcard(t *testing.T, provider, kind string) int {
	t.Helper()
	n, err := b.rdb.ZCard(context.Background(), b.prefix+":{"+provider+"/"+kind+"}:leases").Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestLeaseAcquireRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 2}, "acme/tts": {Limit: 1}}})
	l := b.leases
	req := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "call-1"}

	l1, g1 := l.Acquire(ctx, req)
	l2, g2 := l.Acquire(ctx, req)
	_, g3 := l.Acquire(ctx, req)
	if want := (capacity.Grant{Granted: true, InUse: 1, Limit: 2}); g1 != want {
		t.Fatalf("first grant %+v, want %+v", g1, want)
	}
	if want := (capacity.Grant{Granted: true, InUse: 2, Limit: 2}); g2 != want {
		t.Fatalf("second grant %+v, want %+v", g2, want)
	}
	if want := (capacity.Grant{Granted: false, InUse: 2, Limit: 2}); g3 != want {
		t.Fatalf("third grant %+v, want %+v", g3, want)
	}
	if want := b.clock.Now().Add(capacity.LeaseSTTDefault); !l1.Expires.Equal(want) {
		t.Fatalf("stt lease expires %v, want %v (90s from Redis time)", l1.Expires, want)
	}
	if l1.ID == l2.ID || l1.Holder != "call-1" || l1.Provider != "acme" || l1.Kind != capacity.KindSTT {
		t.Fatalf("leases %+v %+v", l1, l2)
	}
	tl, tg := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindTTS, Holder: "call-1"})
	if !tg.Granted || tg.InUse != 1 || !tl.Expires.Equal(b.clock.Now().Add(capacity.LeaseTTSDefault)) {
		t.Fatalf("tts grant %+v lease %+v: want its own counter and a 60s lease", tg, tl)
	}
	if got := len(l.Held()); got != 3 {
		t.Fatalf("Held: %d leases, want 3", got)
	}

	l.Release(ctx, l1)
	l.Release(ctx, l1) // idempotent
	l.Release(ctx, capacity.Lease{})
	if n := b.zcard(t, "acme", "stt"); n != 1 {
		t.Fatalf("after release: %d leases, want 1", n)
	}
	if _, g := l.Acquire(ctx, req); !g.Granted || g.InUse != 2 {
		t.Fatalf("after release: grant %+v, want granted at 2", g)
	}
	if got := l.Uncounted(); got != 0 {
		t.Fatalf("Uncounted %d, want 0", got)
	}

	// A provider without a configured limit is not counted.
	if _, g := l.Acquire(ctx, capacity.Request{Provider: "unknown", Kind: capacity.KindSTT}); !g.Granted || !g.Uncounted {
		t.Fatalf("unconfigured provider: grant %+v, want granted uncounted", g)
	}
}

func TestLeaseExpiryAndRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 1}, "other/tts": {Limit: 5}}})
	l := b.leases
	a, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "a"})
	o, _ := l.Acquire(ctx, capacity.Request{Provider: "other", Kind: capacity.KindTTS, Holder: "a"})
	if !g.Granted {
		t.Fatal("not granted")
	}
	b.clock.Advance(50 * time.Second)
	res := l.Refresh(ctx, []capacity.Lease{a, o, {}})
	if res.Failed || len(res.Lost) != 0 || len(res.Refreshed) != 2 {
		t.Fatalf("refresh at 50s: %+v, want both refreshed", res)
	}
	for _, r := range res.Refreshed {
		want := b.clock.Now().Add(capacity.LeaseSTTDefault)
		if r.Kind == capacity.KindTTS {
			want = b.clock.Now().Add(capacity.LeaseTTSDefault)
		}
		if !r.Expires.Equal(want) {
			t.Fatalf("refreshed %+v, want expiry %v", r, want)
		}
	}
	b.clock.Advance(70 * time.Second) // 120s: stt alive (until 140s), tts lapsed at 110s
	res = l.RefreshHeld(ctx)
	if len(res.Lost) != 1 || res.Lost[0].ID != o.ID || len(res.Refreshed) != 1 {
		t.Fatalf("refresh at 120s: %+v, want the tts lease lost", res)
	}
	if got := len(l.Held()); got != 1 {
		t.Fatalf("Held after loss: %d, want 1", got)
	}
	b.clock.Advance(91 * time.Second)
	if _, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "b"}); !g.Granted || g.InUse != 1 {
		t.Fatalf("after expiry: grant %+v, want the expired lease's slot", g)
	}
	res = l.Refresh(ctx, []capacity.Lease{a})
	if len(res.Lost) != 1 {
		t.Fatalf("refresh of an expired, trimmed lease: %+v, want lost", res)
	}
}

func TestLeaseBatchReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 5, BatchReserve: 2}}})
	l := b.leases
	batch := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "job", Lane: capacity.Batch}
	live := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "call", Lane: capacity.Live}
	var held []capacity.Lease
	for i := range 3 {
		lease, g := l.Acquire(ctx, batch)
		if !g.Granted || g.InUse != i+1 {
			t.Fatalf("batch %d: %+v, want granted", i, g)
		}
		held = append(held, lease)
	}
	if _, g := l.Acquire(ctx, batch); g.Granted || g.InUse != 3 || g.Limit != 5 {
		t.Fatalf("4th batch: %+v, want refused (share of 5 − 2 used up)", g)
	}
	for i := range 2 {
		if _, g := l.Acquire(ctx, live); !g.Granted {
			t.Fatalf("live %d: %+v, want a reserved slot", i, g)
		}
	}
	if _, g := l.Acquire(ctx, live); g.Granted || g.InUse != 5 {
		t.Fatalf("6th: %+v, want refused at the limit", g)
	}
	l.Release(ctx, held[0])
	if _, g := l.Acquire(ctx, batch); g.Granted {
		t.Fatalf("batch with 4 of 5 in use: %+v, want refused (the free slot is live's)", g)
	}
	if _, g := l.Acquire(ctx, live); !g.Granted {
		t.Fatalf("live with 4 of 5 in use: %+v, want granted", g)
	}
}

func TestLeaseConfigValidate(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for name, tc := range map[string]struct {
		cfg     capacity.Config
		wantErr string
	}{
		"no redis":         {capacity.Config{}, "Config.Redis"},
		"bad kind":         {capacity.Config{Redis: rdb, Limits: map[string]capacity.ProviderLimit{"acme/asr": {Limit: 1}}}, "Config.Limits"},
		"no kind":          {capacity.Config{Redis: rdb, Limits: map[string]capacity.ProviderLimit{"acme": {Limit: 1}}}, "Config.Limits"},
		"brace":            {capacity.Config{Redis: rdb, Limits: map[string]capacity.ProviderLimit{"a{b}/stt": {Limit: 1}}}, "Config.Limits"},
		"negative limit":   {capacity.Config{Redis: rdb, Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: -1}}}, "Config.Limits"},
		"negative lease":   {capacity.Config{Redis: rdb, LeaseTTS: -time.Second}, "Config.LeaseTTS"},
		"slow heartbeat":   {capacity.Config{Redis: rdb, HeartbeatEvery: time.Minute}, "Config.HeartbeatEvery"},
		"negative events":  {capacity.Config{Redis: rdb, LimitEventsCap: -1}, "Config.LimitEventsCap"},
		"defaults are ok":  {capacity.Config{Redis: rdb}, ""},
		"configured is ok": {capacity.Config{Redis: rdb, Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 3, BatchReserve: 1}}}, ""},
	} {
		_, err := capacity.New(tc.cfg)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: New error %v, want one naming %q", name, err, tc.wantErr)
		}
	}
}
