package capacity_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/testredis"
)

// BenchmarkAcquireRelease is one Acquire (the lease script) and one
// Release (ZREM): two round trips. Compare with BenchmarkEvalshaTrivial.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	rdb := testredis.Client(b)
	l, err := capacity.New(captest.OnRedis(b, rdb, testredis.Prefix(b, rdb, "capacity")), capacity.Config{
		Limits: map[string]capacity.ProviderLimit{"bench/stt": {Limit: 1000}}})
	if err != nil {
		b.Fatal(err)
	}
	req := capacity.Request{Provider: "bench", Kind: capacity.KindSTT, Holder: "bench"}
	for b.Loop() {
		lease, g := l.Acquire(ctx, req)
		if !g.Granted || g.Uncounted {
			b.Fatalf("grant %+v", g)
		}
		l.Release(ctx, lease)
	}
}

// BenchmarkEvalshaTrivial is one EVALSHA of `return 1` through the same
// kind of client: the floor of a script round trip.
func BenchmarkEvalshaTrivial(b *testing.B) {
	ctx := context.Background()
	rdb := testredis.Client(b)
	script := redis.NewScript("return 1")
	for b.Loop() {
		if err := script.Run(ctx, rdb, nil).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaseVsEvalsha interleaves one Acquire + Release with two
// trivial EVALSHAs through the same client, so that both see the same
// machine load, and reports ratio = (2 × EVALSHA) / (Acquire + Release):
// 1 would mean a lease costs no more than its two bare round trips.
func BenchmarkLeaseVsEvalsha(b *testing.B) {
	ctx := context.Background()
	rdb := testredis.Client(b)
	l, err := capacity.New(captest.OnRedis(b, rdb, testredis.Prefix(b, rdb, "capacity")), capacity.Config{
		Limits: map[string]capacity.ProviderLimit{"bench/stt": {Limit: 1000}}})
	if err != nil {
		b.Fatal(err)
	}
	script := redis.NewScript("return 1")
	req := capacity.Request{Provider: "bench", Kind: capacity.KindSTT, Holder: "bench"}
	var leaseTime, bareTime time.Duration
	for b.Loop() {
		start := time.Now()
		lease, g := l.Acquire(ctx, req)
		if !g.Granted || g.Uncounted {
			b.Fatalf("grant %+v", g)
		}
		l.Release(ctx, lease)
		mid := time.Now()
		for range 2 {
			if err := script.Run(ctx, rdb, nil).Err(); err != nil {
				b.Fatal(err)
			}
		}
		leaseTime, bareTime = leaseTime+mid.Sub(start), bareTime+time.Since(mid)
	}
	b.ReportMetric(float64(bareTime)/float64(leaseTime), "ratio")
	b.ReportMetric(float64(leaseTime.Nanoseconds())/float64(b.N), "lease-ns/op")
	b.ReportMetric(float64(bareTime.Nanoseconds())/float64(2*b.N), "evalsha-ns/op")
}

// BenchmarkWindowAcquireRelease is one window Acquire and one Release of
// a scope with room: the two scripts a windowed request costs. Compare
// with BenchmarkEvalshaTrivial (two of them are the round trips' floor).
func BenchmarkWindowAcquireRelease(b *testing.B) {
	ctx := context.Background()
	rdb := testredis.Client(b)
	w, err := capacity.NewWindows(captest.OnRedis(b, rdb, testredis.Prefix(b, rdb, "window")), capacity.WindowConfig{Initial: 32, StartTarget: 32})
	if err != nil {
		b.Fatal(err)
	}
	req := capacity.WindowRequest{Scope: "bench:window", Holder: "bench", Lane: lane.Immediate, Max: 32}
	for b.Loop() {
		if g := w.Acquire(ctx, req); !g.Granted || g.Uncounted {
			b.Fatalf("grant %+v", g)
		}
		w.Release(ctx, req.Scope, req.Holder, capacity.Success, "", req.Max)
	}
}
