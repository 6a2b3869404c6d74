package live_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
)

// A script fault: the script runs on Redis and its reply is lost (the
// caller gets a timeout), or the request never reaches Redis.
type scriptFault int

const (
	replyLost scriptFault = iota + 1
	neverRan
)

// scriptFaults fails the round trips of one script (by its hash) in the
// order planned, then lets them through; ran counts the runs Redis made.
type scriptFaults struct {
	sha  string
	mu   sync.Mutex
	plan []scriptFault
	ran  int
}

func (f *scriptFaults) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *scriptFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *scriptFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !f.isScript(cmd) {
			return next(ctx, cmd)
		}
		f.mu.Lock()
		var fault scriptFault
		if len(f.plan) > 0 {
			fault = f.plan[0]
		}
		f.mu.Unlock()
		if fault == neverRan {
			f.consume()
			err := &net.OpError{Op: "read", Net: "tcp", Err: context.DeadlineExceeded}
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err // not run: Script.Run sends the body next
		}
		f.mu.Lock()
		f.ran++
		f.mu.Unlock()
		if fault == replyLost {
			f.consume()
			lost := &net.OpError{Op: "read", Net: "tcp", Err: context.DeadlineExceeded}
			cmd.SetErr(lost)
			return lost
		}
		return err
	}
}

func (f *scriptFaults) consume() {
	f.mu.Lock()
	f.plan = f.plan[1:]
	f.mu.Unlock()
}

func (f *scriptFaults) runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ran
}

// isScript: the command runs the script, by its hash (EVALSHA) or its
// body (EVAL).
func (f *scriptFaults) isScript(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	name, _ := args[0].(string)
	arg, _ := args[1].(string)
	switch strings.ToLower(name) {
	case "evalsha":
		return arg == f.sha
	case "eval":
		sum := sha1.Sum([]byte(arg))
		return hex.EncodeToString(sum[:]) == f.sha
	}
	return false
}

// reserveSetup is dialSetup with out-1 and out-2 queued for the one
// transcriber slot, and faults planned for the reserve script.
func reserveSetup(t *testing.T, plan ...scriptFault) (*dialBundle, *scriptFaults) {
	t.Helper()
	ctx := context.Background()
	b := dialSetup(t)
	f := &scriptFaults{sha: live.DialReserveScriptHash(), plan: plan}
	b.rdb.AddHook(f)
	for _, id := range []string{"out-1", "out-2"} {
		b.dialer.Enqueue(ctx, live.Call{ID: id, Providers: dialProviders})
	}
	return b, f
}

// holdsWhatItWasDialledWith checks that callID is reserved holding the
// transcriber lease it was dialled with (got).
func holdsWhatItWasDialledWith(t *testing.T, b *dialBundle, callID string, got dialed) {
	t.Helper()
	st, err := b.dialer.State(context.Background(), callID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != live.DialReserved {
		t.Fatalf("%s is %s, want reserved", callID, st.State)
	}
	if lease := st.Reservation.Transcriber.Lease; lease.ID != got.res.Transcriber.Lease.ID {
		t.Fatalf("%s holds lease %s, dialled with %s", callID, lease.ID, got.res.Transcriber.Lease.ID)
	}
}

// unknownOutcomes are the ways a pass can get no answer from any of its
// reserve tries, with how many times Redis ran the script by the time the
// next pass settled it.
var unknownOutcomes = []struct {
	name string
	plan []scriptFault
	runs int
}{
	{"first try ran", []scriptFault{replyLost, neverRan, neverRan}, 2},
	{"no try reached", []scriptFault{neverRan, neverRan, neverRan}, 1},
}

// The reserve script ran but its reply was lost (a timeout under load):
// the retry learns that the reservation went in, so the call is dialled
// holding the one slot, and the next call waits. Taking the lost reply for
// a lost race would give the slot back while the reserved call is
// dialled, and the next call would take it: two transcribers on a plan
// of one.
func TestDialerReserveReplyLostIsNotALostRace(t *testing.T) {
	ctx := context.Background()
	b, f := reserveSetup(t, replyLost)
	b.start()
	got := b.waitDialed(t)
	if got.call.ID != "out-1" {
		t.Fatalf("dialled %s, want out-1 (its reservation went in)", got.call.ID)
	}
	b.waitQueued(t, "out-2")
	b.notDialed(t)
	holdsWhatItWasDialledWith(t, b, "out-1", got)
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want out-1's one", n)
	}
	if n := f.runs(); n != 2 {
		t.Fatalf("the reserve script ran %d times, want 2 (the lost reply and its retry)", n)
	}
	b.dialer.CallEnded(ctx, "out-1")
	if got := b.waitDialed(t); got.call.ID != "out-2" {
		t.Fatalf("dialled %s after out-1 ended, want out-2", got.call.ID)
	}
	if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
		t.Fatalf("stt leases %d, want out-2's one", n)
	}
}

// No try of a pass got an answer: the outcome is unknown, so the slot is
// kept (counted) and nothing is dialled or given back; the call and the
// calls behind it wait. The next pass learns the outcome: won whether the
// first try went in (ran) or none did (the call still queued is reserved
// now), and the call is dialled with the slot it kept, never a second.
func TestDialerReserveOutcomeUnknownWaitsForTheNextPass(t *testing.T) {
	for _, o := range unknownOutcomes {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			b, f := reserveSetup(t, o.plan...)
			b.start()
			b.waitQueued(t, "out-2")
			b.notDialed(t)
			if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
				t.Fatalf("stt leases %d while out-1's outcome is unknown, want its slot kept", n)
			}
			b.tick <- time.Now()
			got := b.waitDialed(t)
			if got.call.ID != "out-1" {
				t.Fatalf("dialled %s, want out-1", got.call.ID)
			}
			holdsWhatItWasDialledWith(t, b, "out-1", got)
			b.tick <- time.Now() // a pass that has nothing to resolve
			b.waitQueued(t, "out-2")
			b.notDialed(t)
			if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
				t.Fatalf("stt leases %d, want out-1's one", n)
			}
			if n := f.runs(); n != o.runs {
				t.Fatalf("the reserve script ran %d times, want %d", n, o.runs)
			}
			b.dialer.CallEnded(ctx, "out-1")
			if got := b.waitDialed(t); got.call.ID != "out-2" {
				t.Fatalf("dialled %s after out-1 ended, want out-2", got.call.ID)
			}
		})
	}
}

// The outcome was unknown and the call ended meanwhile: the next pass
// learns the reservation is not (or no longer) the call's, gives the kept
// slot back, and the next call takes it.
func TestDialerReserveOutcomeUnknownAndTheCallEnded(t *testing.T) {
	for _, o := range unknownOutcomes {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			b, _ := reserveSetup(t, o.plan...)
			b.start()
			b.waitQueued(t, "out-2")
			b.dialer.CallEnded(ctx, "out-1") // prompts a pass
			got := b.waitDialed(t)
			if got.call.ID != "out-2" {
				t.Fatalf("dialled %s, want out-2 (out-1 ended)", got.call.ID)
			}
			if n := b.zcard(t, "stt", capacity.KindSTT); n != 1 {
				t.Fatalf("stt leases %d, want out-2's one (out-1's kept slot given back)", n)
			}
			holdsWhatItWasDialledWith(t, b, "out-2", got)
		})
	}
}

// Answering a reserved call whose first reply was lost: the retry finds
// it answered and hands the reservation over all the same, instead of
// telling the caller nothing was reserved.
func TestDialerAnswerReplyLost(t *testing.T) {
	ctx := context.Background()
	b := dialSetup(t)
	b.dialer.Enqueue(ctx, live.Call{ID: "out-1", Providers: dialProviders})
	b.start()
	got := b.waitDialed(t)
	f := &scriptFaults{sha: live.DialAnswerScriptHash(), plan: []scriptFault{replyLost}}
	b.rdb.AddHook(f)
	slot, ok := b.dialer.Answered(ctx, "out-1")
	if !ok || slot.Lease.ID != got.res.Transcriber.Lease.ID || !slot.Lease.Counted() {
		t.Fatalf("Answered %+v %v after a lost reply, want the reserved slot %+v", slot, ok, got.res.Transcriber)
	}
	if n := f.runs(); n != 2 {
		t.Fatalf("the answer script ran %d times, want 2 (the lost reply and its retry)", n)
	}
	st, err := b.dialer.State(ctx, "out-1")
	if err != nil || st.State != live.DialAnswered {
		t.Fatalf("out-1 is %+v %v, want answered", st, err)
	}
}
