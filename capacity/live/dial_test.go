package live_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
)

// dialed is one call handed to Run's dial func.
type dialed struct {
	call live.Call
	res  live.Reservation
}

type dialBundle struct {
	*leaseBundle
	dialer *live.Dialer
	tick   chan time.Time
	dialed chan dialed
	start  func()
}

// dialSetup returns a Dialer with an injected ticker over limits
// "stt/stt" 1 and "tts/tts" 1. b.start starts its Run loop, which is
// stopped (and checked to have returned, leaving no goroutine) at cleanup.
// Calls enqueued before start are all checked by Run's first pass, which
// also answers Enqueue's prompts, so that once they show as waiting Run is
// idle until the next tick or CallEnded.
func dialSetup(t *testing.T) *dialBundle {
	t.Helper()
	// Registered first, so it runs last, after Run stopped and the Redis
	// client closed. The tests using it are not parallel, so no other
	// test's goroutines come and go meanwhile.
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b := &dialBundle{leaseBundle: leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{
		"stt/stt": {Limit: 1}, "tts/tts": {Limit: 1}}}),
		tick: make(chan time.Time), dialed: make(chan dialed, 10)}
	d, err := live.NewDialer(b.leases, live.WithDialTestTick(live.DialerConfig{}, b.tick))
	if err != nil {
		t.Fatal(err)
	}
	b.dialer = d
	b.start = func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.Run(ctx, func(c live.Call, r live.Reservation) { b.dialed <- dialed{c, r} })
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	return b
}

var dialProviders = live.CallProviders{STT: []string{"stt"}, TTS: []string{"tts"}}

// waitQueued waits until callID is queued waiting for provider capacity.
func (b *dialBundle) waitQueued(t *testing.T, callID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, q := range b.dialer.Queued() {
			if q.Call.ID == callID && q.WaitingFor == live.WaitingForCapacity {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not queued waiting for provider capacity: %+v", callID, b.dialer.Queued())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func (b *dialBundle) waitDialed(t *testing.T) dialed {
	t.Helper()
	select {
	case d := <-b.dialed:
		return d
	case <-time.After(5 * time.Second):
		t.Fatalf("nothing dialled; queue %+v", b.dialer.Queued())
		return dialed{}
	}
}

func (b *dialBundle) notDialed(t *testing.T) {
	t.Helper()
	select {
	case d := <-b.dialed:
		t.Fatalf("dialled %+v, want it queued", d)
	default:
	}
}

// A call waits while the transcriber is full, and a call end (CallEnded)
// prompts the re-check that dials it; on answer the reservation becomes
// the call's transcriber slot, released when it ends.
func TestDialerCallEndPromptsDial(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	inbound := live.ConnectTranscriber(ctx, b.leases, "inbound-1", dialProviders)

	b.dialer.Enqueue(live.Call{ID: "out-1", Providers: dialProviders})
	b.start()
	b.waitQueued(t, "out-1")
	b.notDialed(t)

	live.HangUp(ctx, b.leases, inbound)
	b.notDialed(t)                       // a freed slot alone waits for the next re-check
	b.dialer.CallEnded(ctx, "inbound-1") // not the Dialer's call: only a prompt
	got := b.waitDialed(t)
	if got.call.ID != "out-1" || got.res.CallID != "out-1" || got.res.Voice != "tts" ||
		got.res.Transcriber.Provider != "stt" || got.res.Transcriber.OverLimit || got.res.Transcriber.Lease.Holder != "out-1" {
		t.Fatalf("dialled %+v", got)
	}
	if q := b.dialer.Queued(); len(q) != 0 {
		t.Fatalf("queue %+v after dialling, want empty", q)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want the reservation", n)
	}
	if n := b.zcard(t, "tts", capacity.KindTTS); n != 0 {
		t.Fatalf("tts leases %d, want 0: the voice probe is released", n)
	}

	slot, ok := b.dialer.Answered("out-1")
	if !ok || slot != got.res.Transcriber {
		t.Fatalf("Answered %+v %v, want the reserved slot %+v", slot, ok, got.res.Transcriber)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d after answer, want the slot kept", n)
	}
	b.dialer.CallEnded(ctx, "out-1")
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d after the answered call ended, want 0", n)
	}
}

// The periodic re-check (an injected tick) dials a call once a voice frees
// up, with no CallEnded; a reservation never answered is dropped at
// CallEnded.
func TestDialerPeriodicRecheckAndUnanswered(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	voice := hold(t, b.leaseBundle, "tts")

	b.dialer.Enqueue(live.Call{ID: "out-1", Providers: dialProviders})
	b.start()
	b.waitQueued(t, "out-1")
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d while queued, want no reservation", n)
	}

	b.leases.Release(ctx, voice) // freed without a CallEnded
	b.notDialed(t)
	b.tick <- time.Now()
	got := b.waitDialed(t)
	if got.call.ID != "out-1" {
		t.Fatalf("dialled %+v", got)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want the reservation", n)
	}
	b.dialer.CallEnded(ctx, "out-1") // never answered
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d after an unanswered call ended, want 0", n)
	}
	if _, ok := b.dialer.Answered("out-1"); ok {
		t.Fatal("Answered after CallEnded found a reservation")
	}
}

// TryDial alone: no room means no reservation; a queued call that ends is
// dropped from the queue.
func TestDialerTryDialAndQueuedCallEnds(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	c1 := live.Call{ID: "c1", Providers: dialProviders}
	r1, ok := b.dialer.TryDial(ctx, c1)
	if !ok || r1.Transcriber.Lease.Holder != "c1" {
		t.Fatalf("TryDial %+v %v, want a reservation", r1, ok)
	}
	if _, ok := b.dialer.TryDial(ctx, live.Call{ID: "c2", Providers: dialProviders}); ok {
		t.Fatal("TryDial with the transcriber reserved succeeded")
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want 1", n)
	}
	b.dialer.Enqueue(live.Call{ID: "c3", Providers: dialProviders})
	b.start()
	b.waitQueued(t, "c3")
	b.dialer.CallEnded(ctx, "c3") // hung up while queued
	if q := b.dialer.Queued(); len(q) != 0 {
		t.Fatalf("queue %+v, want c3 dropped", q)
	}
	b.dialer.CallEnded(ctx, "c1")
	b.notDialed(t)
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d, want 0", n)
	}
}
