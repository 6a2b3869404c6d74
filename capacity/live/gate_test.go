package live_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity/live"
)

var gateCeilings = map[string]int{"db_pool": 40, "stt_sockets": 100, "tts_sockets": 60}

func TestGateConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  live.GateConfig
		want string
	}{
		{"ok", live.GateConfig{Size: 39, Ceilings: gateCeilings}, ""},
		{"size zero", live.GateConfig{Ceilings: gateCeilings}, "GateConfig.Size must be more than 0"},
		{"size at smallest", live.GateConfig{Size: 40, Ceilings: gateCeilings}, "GateConfig.Size 40 must be below the smallest ceiling, db_pool = 40"},
		{"size above smallest", live.GateConfig{Size: 70, Ceilings: map[string]int{"stt_sockets": 100, "tts_sockets": 60}}, "tts_sockets = 60"},
		{"no ceilings", live.GateConfig{Size: 5}, "GateConfig.Ceilings must name"},
		{"bad ceiling", live.GateConfig{Size: 5, Ceilings: map[string]int{"db_pool": 0}}, `GateConfig.Ceilings["db_pool"] must be more than 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := live.NewGate(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NewGate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NewGate error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// waitFor polls cond until it holds or a 5s deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGateWaitsThenAdmits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	g, err := live.NewGate(live.GateConfig{Size: 2, Ceilings: gateCeilings, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r1, err1 := g.Enter(ctx)
	r2, err2 := g.Enter(ctx)
	if err1 != nil || err2 != nil || g.InUse() != 2 {
		t.Fatalf("Enter: %v, %v; in use %d", err1, err2, g.InUse())
	}
	got := make(chan error, 1)
	var r3 func()
	go func() {
		var err error
		r3, err = g.Enter(ctx)
		got <- err
	}()
	waitFor(t, "the 3rd call to wait", func() bool { return g.Waiting() == 1 })
	select {
	case err := <-got:
		t.Fatalf("3rd Enter returned %v while the gate was full", err)
	default:
	}
	r1()
	r1() // idempotent: must not free a second place
	if err := <-got; err != nil {
		t.Fatalf("3rd Enter after a release: %v", err)
	}
	if g.Waiting() != 0 || g.InUse() != 2 || g.Rejected() != 0 {
		t.Fatalf("waiting %d, in use %d, rejected %d; want 0, 2, 0", g.Waiting(), g.InUse(), g.Rejected())
	}
	r2()
	r3()
	if g.InUse() != 0 {
		t.Fatalf("in use %d after every release", g.InUse())
	}
}

func TestGateRejectsToOverflow(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "call-9")
	var overflowed atomic.Int64
	g, err := live.NewGate(live.GateConfig{Size: 1, Ceilings: gateCeilings, Timeout: 30 * time.Millisecond,
		Overflow: func(ctx context.Context) {
			if ctx.Value(ctxKey{}) == "call-9" {
				overflowed.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	release, err := g.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := g.Enter(ctx); !errors.Is(err, live.ErrGateFull) {
		t.Fatalf("Enter on a full gate = %v, want ErrGateFull", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("rejected after %s, before the 30ms timeout", d)
	}
	if g.Rejected() != 1 || overflowed.Load() != 1 || g.Waiting() != 0 {
		t.Fatalf("rejected %d, overflow calls %d, waiting %d; want 1, 1, 0", g.Rejected(), overflowed.Load(), g.Waiting())
	}
	// A cancelled context ends the wait without counting a rejection.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Enter(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with cancelled ctx = %v, want Canceled", err)
	}
	if g.Rejected() != 1 {
		t.Fatalf("rejected %d after a cancelled Enter, want 1", g.Rejected())
	}
	release()
	if r, err := g.Enter(ctx); err != nil {
		t.Fatalf("Enter after release: %v", err)
	} else {
		r()
	}
}

func TestGateNegativeTimeoutRejectsAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g, err := live.NewGate(live.GateConfig{Size: 1, Ceilings: gateCeilings, Timeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	release, _ := g.Enter(context.Background())
	defer release()
	if _, err := g.Enter(context.Background()); !errors.Is(err, live.ErrGateFull) || g.Rejected() != 1 {
		t.Fatalf("Enter = %v, rejected %d; want ErrGateFull, 1", err, g.Rejected())
	}
}

// TestGateManyCallers: never more than Size inside, everyone either admitted
// or rejected, nothing left waiting.
func TestGateManyCallers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g, err := live.NewGate(live.GateConfig{Size: 4, Ceilings: gateCeilings, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var inside, maxInside, admitted atomic.Int64
	done := make(chan struct{})
	for range 200 {
		go func() {
			defer func() { done <- struct{}{} }()
			release, err := g.Enter(context.Background())
			if err != nil {
				return
			}
			admitted.Add(1)
			if v := inside.Add(1); v > maxInside.Load() {
				maxInside.Store(v)
			}
			time.Sleep(time.Millisecond) // hold the place
			inside.Add(-1)
			release()
		}()
	}
	for range 200 {
		<-done
	}
	if maxInside.Load() > 4 || admitted.Load()+g.Rejected() != 200 || g.Waiting() != 0 || g.InUse() != 0 {
		t.Fatalf("max inside %d, admitted %d + rejected %d, waiting %d, in use %d",
			maxInside.Load(), admitted.Load(), g.Rejected(), g.Waiting(), g.InUse())
	}
}
