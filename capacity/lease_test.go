package capacity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/lane"
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
	redis  *capacity.Redis
}

// leaseSetup returns Leases over a fresh key prefix whose script clock is
// the bundle's clock (WithTestNow); the handle's KeyPrefix, Logger and Clock
// are the bundle's.
func leaseSetup(t *testing.T, cfg capacity.Config) *leaseBundle {
	t.Helper()
	b := &leaseBundle{rdb: testredis.Client(t), clock: newLeaseClock(), logs: &leaseLogs{}}
	b.prefix = testredis.Prefix(t, b.rdb, "capacity")
	b.redis = captest.NewRedis(t, capacity.RedisConfig{Client: b.rdb, KeyPrefix: b.prefix, Logger: b.logs.logger(), Clock: b.clock})
	b.cfg = capacity.WithTestNow(cfg, millis(b.clock))
	l, err := capacity.New(b.redis, b.cfg)
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
	batch := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "job", Lane: lane.Batch}
	live := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "call", Lane: lane.Live}
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
	r := captest.OnRedis(t, rdb, "")
	for name, tc := range map[string]struct {
		r       *capacity.Redis
		cfg     capacity.Config
		wantErr string
	}{
		"no redis":         {nil, capacity.Config{}, "Redis is nil"},
		"bad kind":         {r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/asr": {Limit: 1}}}, `Limits["acme/asr"]`},
		"no kind":          {r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme": {Limit: 1}}}, `Limits["acme"]`},
		"brace":            {r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"a{b}/stt": {Limit: 1}}}, `Limits["a{b}/stt"]`},
		"negative limit":   {r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: -1}}}, `Limits["acme/stt"]: must not be negative`},
		"negative lease":   {r, capacity.Config{LeaseTTS: -time.Second}, "LeaseTTS: must not be negative"},
		"slow heartbeat":   {r, capacity.Config{HeartbeatEvery: time.Minute}, "HeartbeatEvery: 1m0s must be shorter"},
		"negative events":  {r, capacity.Config{LimitEventsCap: -1}, "LimitEventsCap: must not be negative"},
		"defaults are ok":  {r, capacity.Config{}, ""},
		"configured is ok": {r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 3, BatchReserve: 1}}}, ""},
	} {
		_, err := capacity.New(tc.r, tc.cfg)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: New error %v, want one naming %q", name, err, tc.wantErr)
		}
	}
}

// RedisConfig.Validate names every field it refuses by its Go name.
func TestRedisConfigValidate(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for name, tc := range map[string]struct {
		cfg  capacity.RedisConfig
		want []string
	}{
		"no client":         {capacity.RedisConfig{}, []string{"Client: is required (or URL)"}},
		"client and URL":    {capacity.RedisConfig{Client: rdb, URL: "redis://127.0.0.1:1"}, []string{"URL: must be empty when Client is set"}},
		"negative timeouts": {capacity.RedisConfig{Client: rdb, OpTimeout: -1, AdmitOpTimeout: -1, WarnInterval: -1}, []string{"AdmitOpTimeout: must be > 0", "OpTimeout: must be > 0", "WarnInterval: must be > 0"}},
		"bad URL":           {capacity.RedisConfig{URL: "http://x"}, []string{"parsing Redis URL"}},
		"defaults are ok":   {capacity.RedisConfig{Client: rdb}, nil},
		"a URL is ok":       {capacity.RedisConfig{URL: "redis://127.0.0.1:1/0"}, nil},
	} {
		r, err := capacity.NewRedis(tc.cfg)
		if (err == nil) != (len(tc.want) == 0) {
			t.Errorf("%s: NewRedis error %v, want %q", name, err, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: NewRedis error %v, want one naming %q", name, err, w)
			}
		}
		if err == nil {
			if got := r.KeyPrefix(); got != capacity.KeyPrefixDefault {
				t.Errorf("%s: KeyPrefix %q, want the default %q", name, got, capacity.KeyPrefixDefault)
			}
			_ = r.Close()
		}
	}
}
