package live_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
)

// eventLog collects OnOverflow events.
type eventLog struct {
	mu     sync.Mutex
	events []live.Event
}

func (e *eventLog) add(ev live.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *eventLog) all() []live.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

func voiceSetup(t *testing.T, limits map[string]int) *leaseBundle {
	t.Helper()
	cfg := capacity.Config{Limits: map[string]capacity.ProviderLimit{}}
	for p, n := range limits {
		cfg.Limits[p+"/tts"] = capacity.ProviderLimit{Limit: n}
	}
	return leaseSetup(t, cfg)
}

// hold takes a voice slot of provider for another call and returns it.
func hold(t *testing.T, b *leaseBundle, provider string) capacity.Lease {
	t.Helper()
	lease, g := b.leases.Acquire(context.Background(), capacity.Request{Provider: provider, Kind: capacity.KindTTS, Holder: "other-call"})
	if !g.Granted {
		t.Fatalf("holding %s: %+v", provider, g)
	}
	return lease
}

func TestVoiceReplyOverflowsToFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := voiceSetup(t, map[string]int{"prim": 1, "fb1": 1, "fb2": 1})
	var log eventLog
	v := live.NewVoice(b.leases, "call-1", []string{"prim", "fb1", "fb2"}, live.VoiceOptions{OnOverflow: log.add})

	r1 := v.StartReply(ctx)
	if r1.Provider != "prim" || r1.Overflowed || r1.OverLimit || r1.Lease.Holder != "call-1" || r1.Lease.Kind != capacity.KindTTS {
		t.Fatalf("first reply %+v, want the primary", r1)
	}
	r1.Done()
	r1.Done() // idempotent
	if n := b.zcard(t, "prim", capacity.KindTTS); n != 0 {
		t.Fatalf("prim after Done: %d leases, want 0", n)
	}
	if len(v.Timeline()) != 0 || len(v.Connected()) != 0 {
		t.Fatalf("no overflow yet, timeline %+v connected %v", v.Timeline(), v.Connected())
	}

	primHeld := hold(t, b, "prim")
	fb1Held := hold(t, b, "fb1")
	r2 := v.StartReply(ctx)
	if r2.Provider != "fb2" || !r2.Overflowed || r2.OverLimit || r2.Lease.ID == "" {
		t.Fatalf("reply with prim and fb1 full: %+v, want fb2", r2)
	}
	r2.Done()
	tl := v.Timeline()
	if len(tl) != 1 {
		t.Fatalf("timeline %+v, want one overflow", tl)
	}
	if e := tl[0]; e.Kind != live.EventVoiceOverflow || e.CallID != "call-1" || e.From != "prim" || e.To != "fb2" || e.Message == "" || e.At.IsZero() {
		t.Fatalf("event %+v", e)
	}
	if got := log.all(); !slices.Equal(got, tl) {
		t.Fatalf("OnOverflow got %+v, timeline %+v", got, tl)
	}
	if got := v.Connected(); !slices.Equal(got, []string{"fb2"}) {
		t.Fatalf("connected %v, want [fb2]", got)
	}

	// fb1 has room again, but the connected fallback fb2 is kept for later
	// overflows and tried first.
	b.leases.Release(ctx, fb1Held)
	r3 := v.StartReply(ctx)
	if r3.Provider != "fb2" || !r3.Overflowed {
		t.Fatalf("second overflow %+v, want the connected fallback fb2", r3)
	}
	// fb2 busy with r3: the next overflow connects fb1 too.
	r4 := v.StartReply(ctx)
	if r4.Provider != "fb1" || !r4.Overflowed {
		t.Fatalf("third overflow %+v, want fb1", r4)
	}
	if got := v.Connected(); !slices.Equal(got, []string{"fb2", "fb1"}) {
		t.Fatalf("connected %v, want [fb2 fb1]", got)
	}
	r3.Done()
	r4.Done()
	if n := len(v.Timeline()); n != 3 {
		t.Fatalf("timeline has %d events, want 3 overflows", n)
	}

	// The primary frees: replies go back to it, with no warning.
	b.leases.Release(ctx, primHeld)
	if r5 := v.StartReply(ctx); r5.Provider != "prim" || r5.Overflowed {
		t.Fatalf("primary free again: %+v", r5)
	} else {
		r5.Done()
	}
	if n := len(v.Timeline()); n != 3 {
		t.Fatalf("timeline has %d events after a primary reply, want still 3", n)
	}
}

// A Voice made for each reply, as the capacity API makes one per request
// (from any process), keeps a call's connected fallbacks through the
// call's Timeline: the fallback the call moved to stays connected for the
// rest of the call and is tried before a fallback not yet connected, and
// another call's replies do not see it.
func TestVoiceFallbackStaysConnectedAcrossReplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := voiceSetup(t, map[string]int{"prim": 1, "fb1": 1, "fb2": 1})
	tl, err := live.NewTimeline(b.redis, live.TimelineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	providers := []string{"prim", "fb1", "fb2"}
	reply := func(callID string) live.Reply {
		return live.NewVoice(b.leases, callID, providers, live.VoiceOptions{Timeline: tl, Wait: -1}).StartReply(ctx)
	}
	primHeld := hold(t, b, "prim")
	fb1Held := hold(t, b, "fb1")
	if r := reply("call-1"); r.Provider != "fb2" || !r.Overflowed {
		t.Fatalf("reply with prim and fb1 full: %+v, want fb2", r)
	} else {
		r.Done()
	}
	if got := tl.ConnectedVoices(ctx, "call-1"); !slices.Equal(got, []string{"fb2"}) {
		t.Fatalf("connected voices of call-1 %v, want [fb2]", got)
	}
	// fb1 has room again: a new Voice of call-1 still takes the connected
	// fb2; call-2, which connected nothing, takes fb1 in the configured order.
	b.leases.Release(ctx, fb1Held)
	for range 3 {
		r := reply("call-1")
		if r.Provider != "fb2" || !r.Overflowed {
			t.Fatalf("a later reply of call-1: %+v, want the connected fallback fb2", r)
		}
		r.Done()
	}
	r2 := reply("call-2")
	if r2.Provider != "fb1" {
		t.Fatalf("call-2's reply: %+v, want fb1 (call-1's fallback is call-1's)", r2)
	}
	r2.Done()
	// fb2 busy: call-1 connects fb1 too, after fb2.
	fb2Held := hold(t, b, "fb2")
	if r := reply("call-1"); r.Provider != "fb1" {
		t.Fatalf("call-1 with fb2 full: %+v, want fb1", r)
	} else {
		r.Done()
	}
	if got := tl.ConnectedVoices(ctx, "call-1"); !slices.Equal(got, []string{"fb2", "fb1"}) {
		t.Fatalf("connected voices of call-1 %v, want [fb2 fb1]", got)
	}
	b.leases.Release(ctx, fb2Held)
	b.leases.Release(ctx, primHeld)
	if r := reply("call-1"); r.Provider != "prim" || r.Overflowed {
		t.Fatalf("primary free again: %+v", r)
	} else {
		r.Done()
	}
}

func TestVoiceReplyWaitsForAFreedSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := voiceSetup(t, map[string]int{"prim": 1, "fb": 1})
	primHeld := hold(t, b, "prim")
	hold(t, b, "fb")
	v := live.NewVoice(b.leases, "call-1", []string{"prim", "fb"}, live.VoiceOptions{Wait: 2 * time.Second, Poll: 10 * time.Millisecond})

	const freeAfter = 50 * time.Millisecond
	start := time.Now()
	timer := time.AfterFunc(freeAfter, func() { b.leases.Release(ctx, primHeld) })
	defer timer.Stop()
	r := v.StartReply(ctx)
	elapsed := time.Since(start)
	defer r.Done()
	if r.Provider != "prim" || r.OverLimit || r.Overflowed || r.Lease.ID == "" {
		t.Fatalf("reply %+v, want the primary's slot freed during the wait", r)
	}
	if elapsed < freeAfter {
		t.Fatalf("got a slot after %s, before it was freed (%s)", elapsed, freeAfter)
	}
	if tl := v.Timeline(); len(tl) != 0 {
		t.Fatalf("timeline %+v, want none: the reply got its own voice", tl)
	}
}

func TestVoiceReplyGoesAheadOverLimitAfterWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := voiceSetup(t, map[string]int{"prim": 1, "fb": 1})
	hold(t, b, "prim")
	hold(t, b, "fb")
	var log eventLog
	const wait = 100 * time.Millisecond
	v := live.NewVoice(b.leases, "call-1", []string{"prim", "fb"}, live.VoiceOptions{Wait: wait, Poll: 10 * time.Millisecond, OnOverflow: log.add})

	start := time.Now()
	r := v.StartReply(ctx)
	if elapsed := time.Since(start); elapsed < wait {
		t.Fatalf("went ahead after %s, want a wait of %s first", elapsed, wait)
	}
	if r.Provider != "prim" || !r.OverLimit || r.Overflowed || r.Lease != (capacity.Lease{}) {
		t.Fatalf("reply %+v, want the primary over the limit with no lease", r)
	}
	r.Done() // no lease: a no-op
	if n := b.zcard(t, "prim", capacity.KindTTS); n != 1 {
		t.Fatalf("prim has %d leases, want 1: an over-limit reply is not counted", n)
	}
	tl := v.Timeline()
	if len(tl) != 1 || tl[0].Kind != live.EventVoiceOverLimit || tl[0].From != "prim" || tl[0].To != "prim" {
		t.Fatalf("timeline %+v, want one over-limit warning", tl)
	}
	if !slices.Equal(log.all(), tl) {
		t.Fatalf("OnOverflow got %+v, timeline %+v", log.all(), tl)
	}

	// A hung-up call (ctx done) does not wait out Wait.
	long := live.NewVoice(b.leases, "call-2", []string{"prim"}, live.VoiceOptions{Wait: time.Minute})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	start = time.Now()
	if r := long.StartReply(cctx); !r.OverLimit {
		t.Fatalf("cancelled reply %+v, want over-limit", r)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("cancelled reply waited %s", elapsed)
	}
	if r := live.NewVoice(b.leases, "call-3", nil, live.VoiceOptions{}).StartReply(ctx); r.Provider != "" || r.OverLimit {
		t.Fatalf("no voice provider: %+v, want the zero Reply", r)
	}
	(live.Reply{}).Done() // safe on the zero Reply
}
