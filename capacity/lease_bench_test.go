package capacity_test

import (
	"context"
	"fmt"
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
	before := testredis.Stats(b, rdb)
	for b.Loop() {
		if err := script.Run(ctx, rdb, nil).Err(); err != nil {
			b.Fatal(err)
		}
	}
	reportRedis(b, rdb, before)
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
	before := testredis.Stats(b, rdb)
	for b.Loop() {
		if g := w.Acquire(ctx, req); !g.Granted || g.Uncounted {
			b.Fatalf("grant %+v", g)
		}
		w.Release(ctx, req.Scope, req.Holder, capacity.Success, "", req.Max)
	}
	reportRedis(b, rdb, before)
}

// BenchmarkWindowLeaseAcquireRelease is what a submission costs Redis: the
// window and vendor lease taken in one script (AcquireWithLease) and given
// back in one round trip (ReleaseWithLease), with other holders in flight.
func BenchmarkWindowLeaseAcquireRelease(b *testing.B) {
	ctx := context.Background()
	rdb := testredis.Client(b)
	r := captest.OnRedis(b, rdb, testredis.Prefix(b, rdb, "window"))
	w, err := capacity.NewWindows(r, capacity.WindowConfig{Initial: 32, StartTarget: 32})
	if err != nil {
		b.Fatal(err)
	}
	l, err := capacity.New(r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"bench/stt": {Limit: 1000}}})
	if err != nil {
		b.Fatal(err)
	}
	req := capacity.WindowRequest{Scope: "bench:window", Lane: lane.Immediate, Max: 32}
	for i := range 16 { // others in flight, as under load
		req.Holder = fmt.Sprint("other-", i)
		if g, _, lg, _ := w.AcquireWithLease(ctx, req, l, capacity.Request{Provider: "bench", Kind: capacity.KindSTT, Holder: req.Holder}); !g.Granted || !lg.Granted {
			b.Fatalf("grant %+v %+v", g, lg)
		}
	}
	req.Holder = "bench"
	lreq := capacity.Request{Provider: "bench", Kind: capacity.KindSTT, Holder: req.Holder}
	before := testredis.Stats(b, rdb)
	for b.Loop() {
		g, lease, lg, _ := w.AcquireWithLease(ctx, req, l, lreq)
		if !g.Granted || g.Uncounted || !lg.Granted {
			b.Fatalf("grant %+v %+v", g, lg)
		}
		w.ReleaseWithLease(ctx, req.Scope, req.Holder, capacity.Success, "", req.Max, l, lease)
	}
	reportRedis(b, rdb, before)
}

// reportRedis reports, per script Redis ran since before, its time in
// scripts and its whole CPU (the round trips' reading and writing
// included).
func reportRedis(b *testing.B, rdb redis.UniversalClient, before testredis.ServerStats) {
	s := testredis.Stats(b, rdb)
	n := s.Scripts - before.Scripts
	if n <= 0 {
		return
	}
	b.ReportMetric((s.ScriptMicros-before.ScriptMicros)/n, "script-µs/script")
	b.ReportMetric((s.CPU-before.CPU)*1e6/n, "redis-cpu-µs/script")
	b.ReportMetric(n/float64(b.N), "scripts/op")
}
