package live_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
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
	d, err := live.NewDialer(captest.OnRedis(t, b.rdb, b.prefix), b.leases, live.WithDialTestTick(live.DialerConfig{}, b.tick))
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
		queued, err := b.dialer.Queued(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range queued {
			if q.Call.ID == callID && q.WaitingFor == live.WaitingForCapacity {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not queued waiting for provider capacity: %+v", callID, queued)
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
		q, _ := b.dialer.Queued(context.Background())
		t.Fatalf("nothing dialled; queue %+v", q)
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

	b.dialer.Enqueue(ctx, live.Call{ID: "out-1", Providers: dialProviders})
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
	if q, _ := b.dialer.Queued(ctx); len(q) != 0 {
		t.Fatalf("queue %+v after dialling, want empty", q)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want the reservation", n)
	}
	if n := b.zcard(t, "tts", capacity.KindTTS); n != 0 {
		t.Fatalf("tts leases %d, want 0: the voice probe is released", n)
	}

	slot, ok := b.dialer.Answered(ctx, "out-1")
	if !ok || slot.Provider != got.res.Transcriber.Provider || slot.Lease.ID != got.res.Transcriber.Lease.ID || !slot.Lease.Counted() {
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

	b.dialer.Enqueue(ctx, live.Call{ID: "out-1", Providers: dialProviders})
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
	if _, ok := b.dialer.Answered(ctx, "out-1"); ok {
		t.Fatal("Answered after CallEnded found a reservation")
	}
}

// TryDial alone stores nothing; a queued call that ends is dropped from
// the queue and leaves nothing behind.
func TestDialerTryDialAndQueuedCallEnds(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	c1 := live.Call{ID: "c1", Providers: dialProviders}
	r1, ok := b.dialer.TryDial(ctx, c1)
	if !ok || r1.Transcriber.Lease.Holder != "c1" {
		t.Fatalf("TryDial %+v %v, want a slot", r1, ok)
	}
	if _, ok := b.dialer.TryDial(ctx, live.Call{ID: "c2", Providers: dialProviders}); ok {
		t.Fatal("TryDial with the transcriber taken succeeded")
	}
	if _, err := b.dialer.State(ctx, "c1"); !errors.Is(err, live.ErrUnknownCall) {
		t.Fatalf("State of a TryDial call: %v, want ErrUnknownCall", err)
	}
	b.dialer.Enqueue(ctx, live.Call{ID: "c3", Providers: dialProviders})
	b.start()
	b.waitQueued(t, "c3")
	st, err := b.dialer.State(ctx, "c3")
	if err != nil || st.State != live.DialQueued || st.Position != 1 || st.WaitingFor != live.WaitingForCapacity || st.QueuedAt.IsZero() {
		t.Fatalf("State of c3: %+v %v", st, err)
	}
	b.dialer.CallEnded(ctx, "c3") // hung up while queued
	if q, _ := b.dialer.Queued(ctx); len(q) != 0 {
		t.Fatalf("queue %+v, want c3 dropped", q)
	}
	if _, err := b.dialer.State(ctx, "c3"); !errors.Is(err, live.ErrUnknownCall) {
		t.Fatalf("State after the end: %v, want ErrUnknownCall", err)
	}
	live.HangUp(ctx, b.leases, r1.Transcriber)
	b.dialer.CallEnded(ctx, "c1")
	b.notDialed(t)
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d, want 0", n)
	}
}

// Calls queued for provider capacity are dialled in the order they were
// queued, one per call end; Dial reserves at once when there is room and
// no one waits; the unanswered call's reservation is given back.
func TestDialerFIFOOnCallEnds(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	st := b.dialer.Dial(ctx, live.Call{ID: "first", Agent: "dana", Providers: dialProviders}, nil)
	if st.State != live.DialReserved || st.Reservation.Transcriber.Lease.Holder != "first" || st.Uncounted {
		t.Fatalf("Dial with room: %+v", st)
	}
	for i, id := range []string{"q1", "q2", "q3"} {
		st := b.dialer.Dial(ctx, live.Call{ID: id, Agent: "dana", Providers: dialProviders}, nil)
		if st.State != live.DialQueued || st.Position != i+1 || st.WaitingFor != live.WaitingForCapacity {
			t.Fatalf("Dial %s with the transcriber reserved: %+v", id, st)
		}
	}
	b.start()
	queued, err := b.dialer.Queued(ctx)
	if err != nil || len(queued) != 3 || queued[0].Call.ID != "q1" || queued[2].Call.ID != "q3" || queued[0].Call.Agent != "dana" ||
		queued[1].Position != 2 || queued[0].QueuedAt.After(queued[1].QueuedAt) {
		t.Fatalf("queue %+v %v", queued, err)
	}
	if _, ok := b.dialer.Answered(ctx, "q1"); ok {
		t.Fatal("Answered a queued call")
	}
	if slot, ok := b.dialer.Answered(ctx, "first"); !ok || slot.Lease.Holder != "first" {
		t.Fatalf("Answered first: %+v %v", slot, ok)
	}
	prev := "first"
	for _, want := range []string{"q1", "q2", "q3"} {
		b.notDialed(t)
		b.dialer.CallEnded(ctx, prev) // first answered, the others unanswered
		got := b.waitDialed(t)
		if got.call.ID != want {
			t.Fatalf("dialled %s, want %s (FIFO)", got.call.ID, want)
		}
		if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
			t.Fatalf("stt leases %d, want 1: the previous reservation was given back", n)
		}
		if st, err := b.dialer.State(ctx, want); err != nil || st.State != live.DialReserved {
			t.Fatalf("State of %s: %+v %v", want, st, err)
		}
		prev = want
	}
	b.dialer.CallEnded(ctx, prev)
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d after every call ended, want 0", n)
	}
}

// Two Dialers (two processes) on one Redis, re-checking from many
// goroutines at once while calls end, never reserve a call twice, never
// hold more transcriber slots than the limit, and lose no call.
func TestDialersShareQueueConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit, calls = 2, 24
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"stt/stt": {Limit: limit}}})
	// A second process: its own Leases and Dialer over the same keys.
	leases2, err := capacity.New(captest.OnRedis(t, b.rdb, b.prefix), capacity.Config{Limits: map[string]capacity.ProviderLimit{"stt/stt": {Limit: limit}}})
	if err != nil {
		t.Fatal(err)
	}
	var dialers []*live.Dialer
	for _, l := range []*capacity.Leases{b.leases, leases2} {
		d, err := live.NewDialer(captest.OnRedis(t, b.rdb, b.prefix), l, live.DialerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		dialers = append(dialers, d)
	}
	p := live.CallProviders{STT: []string{"stt"}}
	for i := range calls {
		dialers[i%2].Enqueue(ctx, live.Call{ID: fmt.Sprintf("c%02d", i), Providers: p})
	}

	var mu sync.Mutex
	dialled := map[string]int{}
	inCall := make(chan string, calls)
	errs := make(chan error, 1)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	onDial := func(c live.Call, _ live.Reservation) {
		mu.Lock()
		dialled[c.ID]++
		n := dialled[c.ID]
		mu.Unlock()
		if n > 1 {
			report(fmt.Errorf("%s dialled %d times", c.ID, n))
		}
		if z := b.zcard(t, "stt", capacity.KindSTT); z > limit {
			report(fmt.Errorf("%d transcriber leases held, limit %d", z, limit))
		}
		inCall <- c.ID
	}
	var wg sync.WaitGroup
	// Re-checkers: both processes, several goroutines each.
	stop := make(chan struct{})
	for g := range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				dialers[g%2].Recheck(ctx, onDial)
			}
		})
	}
	// Enders: each dialled call ends through either process.
	for ended := range calls {
		select {
		case id := <-inCall:
			dialers[ended%2].CallEnded(ctx, id)
		case err := <-errs:
			close(stop)
			wg.Wait()
			t.Fatal(err)
		case <-time.After(20 * time.Second):
			close(stop)
			wg.Wait()
			t.Fatalf("only %d of %d calls dialled", ended, calls)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for i := range calls {
		if id := fmt.Sprintf("c%02d", i); dialled[id] != 1 {
			t.Errorf("%s dialled %d times, want once", id, dialled[id])
		}
	}
	if q, err := dialers[0].Queued(ctx); err != nil || len(q) != 0 {
		t.Fatalf("queue %+v %v, want empty", q, err)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d after every call ended, want 0", n)
	}
}

// Dial while another process holds the re-check lock: that process is
// asked to pass again, and Dial waits for its pass instead of answering
// "capacity check" for a call that has room.
func TestDialWaitsForAnotherProcessPass(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	lock, again := rediskit.Key(b.prefix, "dial", "lock"), rediskit.Key(b.prefix, "dial", "again")
	if err := b.rdb.Set(ctx, lock, "another-process", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got := make(chan live.DialState, 1)
	go func() { got <- b.dialer.Dial(ctx, live.Call{ID: "c1", Providers: dialProviders}, nil) }()
	// The other process sees the request to pass again, and passes.
	deadline := time.Now().Add(5 * time.Second)
	for b.rdb.Exists(ctx, again).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Dial never asked the lock holder to pass again")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case st := <-got:
		t.Fatalf("Dial answered %+v before the holder's pass", st)
	case <-time.After(50 * time.Millisecond):
	}
	b.rdb.Del(ctx, lock, again)
	b.dialer.Recheck(ctx, nil)
	select {
	case st := <-got:
		if st.State != live.DialReserved || st.Reservation.Transcriber.Provider != "stt" || st.Uncounted {
			t.Fatalf("Dial answered %+v, want reserved on stt", st)
		}
		live.HangUp(ctx, b.leases, st.Reservation.Transcriber)
		b.dialer.CallEnded(ctx, "c1")
	case <-time.After(live.DialCheckWait):
		t.Fatal("Dial did not answer after the holder's pass")
	}
}

// Processes sharing a queue may be configured apart for a while (a rolling
// change of limits): a pass leaves a queued call to a process that counts
// every provider its queuer counted, instead of reserving it uncounted,
// past the plan; a call whose providers it counts as its queuer did it
// reserves, counted, whichever process queued it.
func TestDialerLeavesCallsItCannotCount(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t) // counts stt/stt and tts/tts, limit 1 each
	// Another process on the same queue whose configuration has no limit
	// for the transcriber "stt": it would grant that one uncounted.
	otherLeases, err := capacity.New(b.redis, capacity.Config{Limits: map[string]capacity.ProviderLimit{"tts/tts": {Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := live.NewDialer(b.redis, otherLeases, live.WithDialTestTick(live.DialerConfig{}, make(chan time.Time)))
	if err != nil {
		t.Fatal(err)
	}
	var got []dialed
	collect := func(c live.Call, r live.Reservation) { got = append(got, dialed{c, r}) }

	b.dialer.Enqueue(ctx, live.Call{ID: "out-1", Providers: dialProviders}) // queued by a process counting both
	other.Enqueue(ctx, live.Call{ID: "out-2", Providers: dialProviders})    // queued by one counting the voice alone
	other.Recheck(ctx, collect)
	if len(got) != 1 || got[0].call.ID != "out-2" {
		t.Fatalf("the pass of the process without the transcriber's limit dialled %+v, want out-2 alone (out-1 left to a process counting stt)", got)
	}
	if got[0].res.Transcriber.Lease.Counted() {
		t.Fatalf("out-2's transcriber %+v counted by a process with no limit for it", got[0].res.Transcriber)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d, want none: out-1 was not reserved", n)
	}
	if n := b.zcard(t, "tts", capacity.KindTTS); n != 0 {
		t.Fatalf("tts leases %d, want 0: out-2's voice probe is released and out-1 was not probed", n)
	}
	q, err := b.dialer.Queued(ctx)
	if err != nil || len(q) != 1 || q[0].Call.ID != "out-1" || q[0].WaitingFor != live.WaitingForCheck {
		t.Fatalf("queue %+v (%v), want out-1 alone, still waiting for its check", q, err)
	}

	got = nil
	b.dialer.Recheck(ctx, collect)
	if len(got) != 1 || got[0].call.ID != "out-1" || !got[0].res.Transcriber.Lease.Counted() {
		t.Fatalf("the pass of a process counting both dialled %+v, want out-1 with a counted transcriber", got)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want out-1's reservation", n)
	}
	b.dialer.CallEnded(ctx, "out-1")
	other.CallEnded(ctx, "out-2")
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 0 {
		t.Fatalf("stt leases %d after both calls ended, want 0", n)
	}
}
