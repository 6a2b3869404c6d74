package capacity_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// The multi-process gate test's plan: three serve processes sharing one
// gate of 5; 45 clients, each entering three times (through the next
// process each time) and leaving through yet another.
const (
	gmpSize    = 5
	gmpClients = 45
	gmpRounds  = 3
	gmpTTL     = 5 * time.Second
)

// TestGateAcrossServeProcesses runs three `callscribe serve` processes
// sharing one admission gate of size 5 in Redis. 45 clients enter, hold
// their ticket a moment and leave, each step through another process. At
// no instant do more than 5 hold a ticket: neither as the clients count
// (a client counts from its 200 to just before its leave, so its count is
// never above the gate's) nor as Redis counts, sampled throughout. Every
// client gets in, none uncounted, and every ticket is left, through a
// process that did not give it. Then 5 clients die holding their tickets:
// the next 5 calls, through other processes, get in once Redis time passes
// the dead tickets' TTL, and then fill the gate exactly.
func TestGateAcrossServeProcesses(t *testing.T) {
	t.Parallel()
	id := fmt.Sprintf("gmp%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	gateName := id + "-gate"
	config := filepath.Join(t.TempDir(), "callscribe.yaml")
	body := fmt.Sprintf("capacity:\n  gate:\n    name: %s\n    size: %d\n    ceilings: {vendor_plan: %d}\n    ticket_ttl: %s\n",
		gateName, gmpSize, gmpSize+1, gmpTTL)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb := testredis.Client(t)
	t.Cleanup(func() { testredis.DeleteMatching(rdb, "*"+id+"*") })

	bin := buildCallscribe(t)
	const token = "gmp-token-0123456789-abcdefghijklmnopqrstuvwxyz"
	bases := make([]string, 3)
	for i := range bases {
		bases[i] = startServe(t, bin, config, token)
	}
	api := &mpAPI{t: t, token: token, bases: bases, client: &http.Client{Timeout: 3 * time.Minute}}

	// The tickets as Redis counts them, read by a gate of the test's own.
	gate, err := live.NewGate(captest.OnRedis(t, rdb, ""), live.GateConfig{Name: gateName, Size: gmpSize,
		Ceilings: map[string]int{"vendor_plan": gmpSize + 1}})
	if err != nil {
		t.Fatal(err)
	}
	var redisMax, samples atomic.Int64
	stopSampling := make(chan struct{})
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for {
			if n, err := gate.InUse(context.Background()); err == nil {
				samples.Add(1)
				for m := redisMax.Load(); int64(n) > m && !redisMax.CompareAndSwap(m, int64(n)); m = redisMax.Load() {
				}
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	var inside, clientMax, admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, gmpClients*gmpRounds)
	start := time.Now()
	for c := range gmpClients {
		wg.Go(func() {
			for r := range gmpRounds {
				step := c + r
				callID := fmt.Sprintf("%s-call-%d-%d", id, c, r)
				code, got := api.post(step, "/v1/gate/enter", map[string]any{"call_id": callID, "timeout_ms": 120000})
				if code != 200 || got["uncounted"] != false || got["call_id"] != callID {
					errs <- fmt.Errorf("%s: enter through serve %d: %d %v", callID, step%3, code, got)
					return
				}
				admitted.Add(1)
				v := inside.Add(1)
				for m := clientMax.Load(); v > m && !clientMax.CompareAndSwap(m, v); m = clientMax.Load() {
				}
				time.Sleep(5 * time.Millisecond) // the call holds its place
				inside.Add(-1)
				if code, got := api.post(step+1, "/v1/gate/leave", map[string]any{"ticket": got["ticket"]}); code != 204 {
					errs <- fmt.Errorf("%s: leave through serve %d: %d %v", callID, (step+1)%3, code, got)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampling
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d admissions through 3 processes in %s; max holders: %d as the clients count, %d as Redis counts (%d samples)",
		admitted.Load(), elapsed.Round(time.Millisecond), clientMax.Load(), redisMax.Load(), samples.Load())
	if clientMax.Load() > gmpSize || redisMax.Load() > gmpSize {
		t.Fatalf("more than %d held tickets at once: %d as the clients count, %d as Redis counts", gmpSize, clientMax.Load(), redisMax.Load())
	}
	if admitted.Load() != gmpClients*gmpRounds || samples.Load() == 0 {
		t.Fatalf("%d admissions, want %d; %d samples of Redis", admitted.Load(), gmpClients*gmpRounds, samples.Load())
	}
	if n, err := gate.InUse(context.Background()); err != nil || n != 0 {
		t.Fatalf("in use after every leave: %d, %v; want 0", n, err)
	}

	// Five clients die holding a ticket each; the gate is full, and the
	// next call gets in through another process once their TTL passes.
	for i := range gmpSize {
		if code, got := api.post(i, "/v1/gate/enter", map[string]any{"call_id": fmt.Sprintf("%s-dead-%d", id, i), "timeout_ms": 0}); code != 200 {
			t.Fatalf("dead client %d: %d %v", i, code, got)
		}
	}
	if code, got := api.post(0, "/v1/gate/enter", map[string]any{"timeout_ms": 0}); code != 429 || got["error"].(map[string]any)["type"] != "gate_full" {
		t.Fatalf("enter at a gate full of dead tickets: %d %v, want 429 gate_full", code, got)
	}
	// The next calls, through the other processes, get in once the dead
	// tickets' TTL passes, one place per dead ticket; the gate is full of
	// live tickets again then.
	for i := range gmpSize {
		code, got := api.post(i+1, "/v1/gate/enter", map[string]any{"call_id": fmt.Sprintf("%s-next-%d", id, i), "timeout_ms": 60000})
		if code != 200 || got["uncounted"] != false {
			t.Fatalf("enter %d after the dead tickets' TTL: %d %v", i, code, got)
		}
		if w, _ := got["waited_ms"].(float64); i == 0 && time.Duration(w)*time.Millisecond < gmpTTL/2 {
			t.Fatalf("admitted after %vms, before the dead tickets' %s TTL could pass", w, gmpTTL)
		}
	}
	if n, err := gate.InUse(context.Background()); err != nil || n != gmpSize {
		t.Fatalf("in use after the reclaim: %d, %v; want %d (the dead tickets gone, the next calls in)", n, err, gmpSize)
	}
	if code, got := api.post(2, "/v1/gate/enter", map[string]any{"timeout_ms": 0}); code != 429 {
		t.Fatalf("enter at a gate full of live tickets: %d %v, want 429", code, got)
	}
}
