package live_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
)

func TestConnectTranscriberFallsBackThenOverLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"prim/stt": {Limit: 1}, "fall/stt": {Limit: 1}}})
	l := b.leases
	p := live.CallProviders{STT: []string{"prim", "fall"}}

	s1 := live.ConnectTranscriber(ctx, l, "call-1", p)
	if s1.Provider != "prim" || s1.FellBack || s1.OverLimit || s1.Lease.ID == "" || s1.Lease.Holder != "call-1" || s1.Lease.Kind != capacity.KindSTT {
		t.Fatalf("first call %+v, want the primary with a lease held by call-1", s1)
	}
	s2 := live.ConnectTranscriber(ctx, l, "call-2", p)
	if s2.Provider != "fall" || !s2.FellBack || s2.OverLimit || s2.Lease.ID == "" {
		t.Fatalf("second call %+v, want the fallback (primary full)", s2)
	}
	s3 := live.ConnectTranscriber(ctx, l, "call-3", p)
	if s3.Provider != "prim" || !s3.OverLimit || s3.FellBack || s3.Lease != (capacity.Lease{}) {
		t.Fatalf("third call %+v, want the primary over the limit with no lease", s3)
	}
	// An over-limit connect is not counted: the lease sets stay at the limit.
	if a, f := b.zcard(t, "prim", capacity.KindSTT), b.zcard(t, "fall", capacity.KindSTT); a != 1 || f != 1 {
		t.Fatalf("lease sets prim=%d fall=%d, want 1 and 1", a, f)
	}

	live.HangUp(ctx, l, s3) // no lease: a no-op
	if got := b.zcard(t, "prim", capacity.KindSTT); got != 1 {
		t.Fatalf("prim after over-limit hang-up: %d, want 1", got)
	}
	live.HangUp(ctx, l, s1)
	live.HangUp(ctx, l, s1) // idempotent
	if got := b.zcard(t, "prim", capacity.KindSTT); got != 0 {
		t.Fatalf("prim after hang-up: %d, want 0", got)
	}
	if s4 := live.ConnectTranscriber(ctx, l, "call-4", p); s4.Provider != "prim" || s4.FellBack || s4.OverLimit {
		t.Fatalf("after hang-up %+v, want the primary again", s4)
	}
	if got := live.ConnectTranscriber(ctx, l, "call-5", live.CallProviders{}); got != (live.TranscriberSlot{}) {
		t.Fatalf("no STT provider: %+v, want the zero slot", got)
	}
}

// Many goroutines connecting calls and starting replies against small
// limits never hold more than a limit, except through flagged OverLimit
// connections, which hold no lease.
func TestLiveCallsNeverExceedLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := map[string]int{"s1": 2, "s2": 1, "v1": 1, "v2": 2}
	cfg := capacity.Config{Limits: map[string]capacity.ProviderLimit{
		"s1/stt": {Limit: limits["s1"]}, "s2/stt": {Limit: limits["s2"]},
		"v1/tts": {Limit: limits["v1"]}, "v2/tts": {Limit: limits["v2"]},
	}}
	b := leaseSetup(t, cfg)
	l := b.leases
	p := live.CallProviders{STT: []string{"s1", "s2"}, TTS: []string{"v1", "v2"}}

	var inUse sync.Map // provider → *atomic.Int64
	for name := range limits {
		inUse.Store(name, new(atomic.Int64))
	}
	take := func(provider string) error {
		c, _ := inUse.Load(provider)
		if n := c.(*atomic.Int64).Add(1); n > int64(limits[provider]) {
			return fmt.Errorf("%d leases of %s held at once, limit %d", n, provider, limits[provider])
		}
		return nil
	}
	give := func(provider string) {
		c, _ := inUse.Load(provider)
		c.(*atomic.Int64).Add(-1)
	}
	var overSTT, overTTS atomic.Int64
	errs := make(chan error, 1)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for r := range 10 {
				call := fmt.Sprintf("call-%d-%d", g, r)
				s := live.ConnectTranscriber(ctx, l, call, p)
				if s.OverLimit {
					overSTT.Add(1)
				} else if err := take(s.Provider); err != nil {
					report(err)
				}
				v := live.NewVoice(l, call, p.TTS, live.VoiceOptions{Wait: -1})
				rep := v.StartReply(ctx)
				if rep.OverLimit {
					overTTS.Add(1)
				} else if err := take(rep.Provider); err != nil {
					report(err)
				}
				if !rep.OverLimit {
					give(rep.Provider)
				}
				rep.Done()
				if !s.OverLimit {
					give(s.Provider)
				}
				live.HangUp(ctx, l, s)
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if overSTT.Load() == 0 || overTTS.Load() == 0 {
		t.Logf("over-limit connects: stt %d tts %d (contention too low to force any)", overSTT.Load(), overTTS.Load())
	}
	for _, pk := range [][2]string{{"s1", capacity.KindSTT}, {"s2", capacity.KindSTT}, {"v1", capacity.KindTTS}, {"v2", capacity.KindTTS}} {
		if n := b.zcard(t, pk[0], pk[1]); n != 0 {
			t.Errorf("%s/%s: %d leases left after every call ended", pk[0], pk[1], n)
		}
	}
}
