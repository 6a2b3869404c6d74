package live_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

var gateCeilings = map[string]int{"vendor_plan": 40, "sip_trunk": 100, "db_pool": 60}

func TestGateConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  live.GateConfig
		want string
	}{
		{"ok", live.GateConfig{Size: 39, Ceilings: gateCeilings}, ""},
		{"size zero", live.GateConfig{Ceilings: gateCeilings}, "GateConfig.Size must be more than 0"},
		{"size huge", live.GateConfig{Size: live.GateSizeMax + 1, Ceilings: map[string]int{"x": live.GateSizeMax + 2}}, "at most 100000"},
		{"size at smallest", live.GateConfig{Size: 40, Ceilings: gateCeilings}, "GateConfig.Size 40 must be below the smallest ceiling, vendor_plan = 40"},
		{"size above smallest", live.GateConfig{Size: 70, Ceilings: map[string]int{"sip_trunk": 100, "db_pool": 60}}, "db_pool = 60"},
		{"no ceilings", live.GateConfig{Size: 5}, "GateConfig.Ceilings must name"},
		{"bad ceiling", live.GateConfig{Size: 5, Ceilings: map[string]int{"db_pool": 0}}, `GateConfig.Ceilings["db_pool"] must be more than 0`},
		{"bad name", live.GateConfig{Name: "a}b", Size: 5, Ceilings: gateCeilings}, "GateConfig.Name has"},
		{"negative ttl", live.GateConfig{Size: 5, Ceilings: gateCeilings, TicketTTL: -time.Second}, "GateConfig.TicketTTL must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.WithDefaults().Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := live.NewGate(nil, live.GateConfig{Size: 1, Ceilings: gateCeilings}); err == nil {
		t.Fatal("NewGate without Redis: no error")
	}
}

// gateLogs collects JSON log records; safe for concurrent use.
type gateLogs struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *gateLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *gateLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// records returns the records whose message is msg.
func (l *gateLogs) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", sc.Text())
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

type gateBundle struct {
	rdb    *redis.Client
	prefix string
	redis  *capacity.Redis
	logs   *gateLogs
}

// gateSetup returns a capacity handle over a fresh key prefix whose
// logger writes JSON records to the bundle's logs.
func gateSetup(t *testing.T) *gateBundle {
	t.Helper()
	b := &gateBundle{logs: &gateLogs{}}
	b.rdb, b.prefix = testredis.New(t, "live")
	b.redis = b.handle(t)
	return b
}

// handle is another capacity handle on the same Redis and prefix, as
// another process has (its own client, its own fail-open counters).
func (b *gateBundle) handle(t *testing.T) *capacity.Redis {
	t.Helper()
	rdb := testredis.Client(t)
	return captest.NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: b.prefix,
		Logger: slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
}

func (b *gateBundle) gate(t *testing.T, r *capacity.Redis, cfg live.GateConfig) *live.Gate {
	t.Helper()
	if cfg.Ceilings == nil {
		cfg.Ceilings = gateCeilings
	}
	g, err := live.NewGate(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func inUse(t *testing.T, g *live.Gate) int {
	t.Helper()
	n, err := g.InUse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or a 10s deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A full gate makes the next call wait; a leave, in another process's
// Gate of the same name, lets it in; a ticket is left once.
func TestGateWaitsThenAdmits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	b := gateSetup(t)
	g := b.gate(t, b.redis, live.GateConfig{Size: 2, Timeout: 30 * time.Second})
	other := b.gate(t, b.handle(t), live.GateConfig{Size: 2, Timeout: 30 * time.Second})
	t1, err1 := g.Enter(ctx, "acme", "call-1")
	t2, err2 := other.Enter(ctx, "acme", "call-2")
	if err1 != nil || err2 != nil || inUse(t, g) != 2 || t1.Uncounted || t2.Uncounted {
		t.Fatalf("Enter: %v, %v; in use %d; tickets %+v %+v", err1, err2, inUse(t, g), t1, t2)
	}
	if len(t1.ID) != 32 || t1.ID == t2.ID || t1.ExpiresAt.Before(time.Now().Add(19*time.Minute)) || t2.InUse != 2 {
		t.Fatalf("tickets %+v, %+v: want distinct 32-character ids expiring in 20m, the second with in_use 2", t1, t2)
	}
	type entered struct {
		t   live.Ticket
		err error
	}
	got := make(chan entered, 1)
	go func() {
		tk, err := g.Enter(ctx, "acme", "call-3")
		got <- entered{tk, err}
	}()
	waitFor(t, "the 3rd call to wait", func() bool { return g.Waiting() == 1 })
	select {
	case e := <-got:
		t.Fatalf("3rd Enter returned %+v while the gate was full", e)
	default:
	}
	// Left through the other process's gate, which did not give the ticket.
	if !other.Leave(ctx, t1) {
		t.Fatal("Leave of a live ticket in another Gate: false")
	}
	if other.Leave(ctx, t1) {
		t.Fatal("a second Leave of the same ticket: true (it must not free a second place)")
	}
	e := <-got
	if e.err != nil || e.t.Waited <= 0 {
		t.Fatalf("3rd Enter after a leave: %+v", e)
	}
	if g.Waiting() != 0 || inUse(t, g) != 2 || g.Rejected() != 0 || g.Admitted() != 2 || other.Admitted() != 1 {
		t.Fatalf("waiting %d, in use %d, rejected %d, admitted %d+%d; want 0, 2, 0, 2+1",
			g.Waiting(), inUse(t, g), g.Rejected(), g.Admitted(), other.Admitted())
	}
	if !g.Leave(ctx, t2) || !g.Leave(ctx, e.t) || inUse(t, g) != 0 {
		t.Fatalf("in use %d after every leave", inUse(t, g))
	}
}

func TestGateRejectsToOverflow(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "call-9")
	var overflowed atomic.Int64
	b := gateSetup(t)
	g := b.gate(t, b.redis, live.GateConfig{Size: 1, Timeout: 60 * time.Millisecond,
		Overflow: func(ctx context.Context) {
			if ctx.Value(ctxKey{}) == "call-9" {
				overflowed.Add(1)
			}
		}})
	tk, err := g.Enter(ctx, "", "call-8")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = g.Enter(ctx, "", "call-9")
	var full *live.GateFullError
	if !errors.Is(err, live.ErrGateFull) || !errors.As(err, &full) || full.InUse != 1 || full.Size != 1 {
		t.Fatalf("Enter on a full gate = %v, want a GateFullError of in use 1, size 1", err)
	}
	if d := time.Since(start); d < 60*time.Millisecond || full.Waited < 60*time.Millisecond {
		t.Fatalf("rejected after %s (waited %s), before the 60ms timeout", d, full.Waited)
	}
	if g.Rejected() != 1 || overflowed.Load() != 1 || g.Waiting() != 0 {
		t.Fatalf("rejected %d, overflow calls %d, waiting %d; want 1, 1, 0", g.Rejected(), overflowed.Load(), g.Waiting())
	}
	// A cancelled context ends the wait without counting a rejection.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Enter(cctx, "", "call-10"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with cancelled ctx = %v, want Canceled", err)
	}
	if g.Rejected() != 1 || inUse(t, g) != 1 {
		t.Fatalf("rejected %d, in use %d after a cancelled Enter; want 1, 1", g.Rejected(), inUse(t, g))
	}
	g.Leave(ctx, tk)
	if tk, err := g.Enter(ctx, "", "call-11"); err != nil {
		t.Fatalf("Enter after the leave: %v", err)
	} else {
		g.Leave(ctx, tk)
	}
	st := g.Stats()
	if st.Waits[live.GateRejected].Count != 1 || st.Waits[live.GateAdmitted].Count != 2 || st.Admitted != 2 || st.Rejected != 1 {
		t.Fatalf("stats %+v: want 2 admitted and 1 rejected wait", st)
	}
	if c := st.Waits[live.GateRejected].Cumulative; c[0.05] != 0 || c[0.1] != 1 && c[0.25] != 1 {
		t.Fatalf("the 60ms rejection is in buckets %v, want above 0.05s", c)
	}
}

func TestGateNegativeTimeoutRejectsAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	b := gateSetup(t)
	g := b.gate(t, b.redis, live.GateConfig{Size: 1, Timeout: -1})
	tk, err := g.Enter(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Leave(ctx, tk)
	if _, err := g.Enter(ctx, "", ""); !errors.Is(err, live.ErrGateFull) || g.Rejected() != 1 {
		t.Fatalf("Enter = %v, rejected %d; want ErrGateFull, 1", err, g.Rejected())
	}
	if _, err := g.Enter(ctx, "a b", ""); err == nil {
		t.Fatal("Enter with org \"a b\": no error")
	}
}

// TestGateManyCallers: 200 calls through two Gates of one name (two
// processes' worth): never more than Size inside, each either admitted or
// rejected, nothing left waiting or held.
func TestGateManyCallers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := gateSetup(t)
	gates := []*live.Gate{
		b.gate(t, b.redis, live.GateConfig{Size: 4, Timeout: 50 * time.Millisecond}),
		b.gate(t, b.handle(t), live.GateConfig{Size: 4, Timeout: 50 * time.Millisecond}),
	}
	var inside, maxInside, admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			g := gates[i%2]
			tk, err := g.Enter(context.Background(), "", "")
			if err != nil {
				if !errors.Is(err, live.ErrGateFull) {
					t.Errorf("Enter: %v", err)
				}
				return
			}
			admitted.Add(1)
			v := inside.Add(1)
			for m := maxInside.Load(); v > m && !maxInside.CompareAndSwap(m, v); m = maxInside.Load() {
			}
			time.Sleep(time.Millisecond) // hold the place
			inside.Add(-1)
			gates[(i+1)%2].Leave(context.Background(), tk)
		})
	}
	wg.Wait()
	rejected := gates[0].Rejected() + gates[1].Rejected()
	if maxInside.Load() > 4 || admitted.Load()+rejected != 200 || gates[0].Waiting()+gates[1].Waiting() != 0 || inUse(t, gates[0]) != 0 {
		t.Fatalf("max inside %d, admitted %d + rejected %d, waiting %d, in use %d",
			maxInside.Load(), admitted.Load(), rejected, gates[0].Waiting()+gates[1].Waiting(), inUse(t, gates[0]))
	}
	if admitted.Load() < 4 {
		t.Fatalf("only %d admitted", admitted.Load())
	}
}

// A ticket never left is reclaimed once Redis time passes its TTL: a call
// waiting at the full gate gets in then, the reclaim is logged with the
// dead call's id, and the dead ticket can no longer be left.
func TestGateTicketReclaimedAfterTTL(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	b := gateSetup(t)
	g := b.gate(t, b.redis, live.GateConfig{Size: 1, TicketTTL: 300 * time.Millisecond})
	dead, err := g.Enter(ctx, "acme", "call-dead")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(dead.ExpiresAt); d > time.Second {
		t.Fatalf("a 300ms ticket expires in %s", d)
	}
	next, err := g.EnterWithin(ctx, "acme", "call-next", 30*time.Second)
	if err != nil {
		t.Fatalf("Enter while a dead ticket held the gate: %v, want admitted once it expired", err)
	}
	if g.Reclaimed() != 1 || g.Leave(ctx, dead) {
		t.Fatalf("reclaimed %d, the dead ticket leavable; want 1 and not", g.Reclaimed())
	}
	recs := b.logs.records(t, "call_ticket_reclaimed")
	if len(recs) != 1 || recs[0]["call_id"] != "call-dead" || recs[0]["org"] != "acme" || recs[0]["level"] != "WARN" {
		t.Fatalf("reclaim records %v, want one WARN naming call-dead of acme", recs)
	}
	// The gate's keys leave Redis GateIdleTTL after the newest ticket.
	for _, k := range []string{"tickets", "holders"} {
		ttl, err := b.rdb.PTTL(ctx, b.prefix+":{gate/calls}:"+k).Result()
		if err != nil || ttl <= live.GateIdleTTL-time.Minute || ttl > live.GateIdleTTL+time.Second {
			t.Fatalf("%s key PTTL %s, %v; want the ticket's 300ms and GateIdleTTL", k, ttl, err)
		}
	}
	if !g.Leave(ctx, next) || inUse(t, g) != 0 {
		t.Fatal("the live ticket was not left")
	}
}

// A ticket is left only by its own organisation ("" reaches any).
func TestGateLeaveIsTheOrganisations(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	b := gateSetup(t)
	g := b.gate(t, b.redis, live.GateConfig{Size: 3})
	a, _ := g.Enter(ctx, "acme", "call-1")
	c, _ := g.Enter(ctx, "acme", "call-2")
	if g.LeaveTicket(ctx, "globex", a.ID) || g.LeaveTicket(ctx, "acm", a.ID) || inUse(t, g) != 2 {
		t.Fatalf("another organisation left acme's ticket (in use %d)", inUse(t, g))
	}
	if !g.LeaveTicket(ctx, "acme", a.ID) || !g.LeaveTicket(ctx, "", c.ID) || inUse(t, g) != 0 {
		t.Fatalf("acme's (or any) leave of acme's tickets failed (in use %d)", inUse(t, g))
	}
	if g.LeaveTicket(ctx, "", "0123456789abcdef0123456789abcdef") {
		t.Fatal("a never-given ticket was left")
	}
}

// Admissions, rejections and leaves are logged with the call's id and
// typed attributes, never the ticket.
func TestGateLogsCallID(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	b := gateSetup(t)
	g := b.gate(t, b.redis, live.GateConfig{Size: 1, Timeout: 40 * time.Millisecond})
	tk, err := g.Enter(ctx, "acme", "call-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Enter(ctx, "acme", "call-b"); !errors.Is(err, live.ErrGateFull) {
		t.Fatalf("2nd Enter: %v", err)
	}
	if !g.Leave(ctx, tk) {
		t.Fatal("Leave: false")
	}
	admitted := b.logs.records(t, "call_admitted")
	if len(admitted) != 1 || admitted[0]["call_id"] != "call-a" || admitted[0]["org"] != "acme" || admitted[0]["gate"] != "calls" ||
		admitted[0]["in_use"] != 1.0 || admitted[0]["size"] != 1.0 || admitted[0]["uncounted"] != false {
		t.Fatalf("call_admitted records %v", admitted)
	}
	if _, ok := admitted[0]["waited"].(float64); !ok {
		t.Fatalf("call_admitted's waited is %T, want a duration", admitted[0]["waited"])
	}
	rejected := b.logs.records(t, "call_admission_rejected")
	if len(rejected) != 1 || rejected[0]["call_id"] != "call-b" || rejected[0]["in_use"] != 1.0 {
		t.Fatalf("call_admission_rejected records %v", rejected)
	}
	if w, _ := rejected[0]["waited"].(float64); time.Duration(w) < 40*time.Millisecond {
		t.Fatalf("call_admission_rejected waited %v, want at least the 40ms timeout", rejected[0]["waited"])
	}
	released := b.logs.records(t, "call_released")
	if len(released) != 1 || released[0]["call_id"] != "call-a" || released[0]["org"] != "acme" {
		t.Fatalf("call_released records %v", released)
	}
	if h, _ := released[0]["held"].(float64); h < 0 {
		t.Fatalf("call_released held %v", released[0]["held"])
	}
	if strings.Contains(b.logs.String(), tk.ID) {
		t.Fatalf("the ticket reached the log:\n%s", b.logs.String())
	}
}

// With Redis unreachable every call is admitted uncounted, one warning is
// logged (not one per call), and leaving goes ahead too.
func TestGateFailOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &gateLogs{}
	r := captest.NewRedis(t, capacity.RedisConfig{URL: "redis://127.0.0.1:1/0", KeyPrefix: "unreachable",
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	t.Cleanup(func() { _ = r.Close() })
	g, err := live.NewGate(r, live.GateConfig{Size: 1, Ceilings: gateCeilings, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var tickets []live.Ticket
	for i := range 3 {
		start := time.Now()
		tk, err := g.Enter(ctx, "acme", "call-"+string(rune('a'+i)))
		if err != nil || !tk.Uncounted || !strings.HasPrefix(tk.ID, live.UncountedTicketPrefix) || len(tk.ID) != 32 || !tk.ExpiresAt.IsZero() {
			t.Fatalf("Enter %d without Redis: %+v, %v; want an uncounted ticket", i, tk, err)
		}
		if d := time.Since(start); d > 900*time.Millisecond {
			t.Fatalf("Enter %d without Redis took %s: it waited instead of failing open", i, d)
		}
		tickets = append(tickets, tk)
	}
	if !g.Leave(ctx, tickets[0]) || !g.LeaveTicket(ctx, "acme", "0123456789abcdef0123456789abcdef") {
		t.Fatal("Leave without Redis: false, want true (fail open)")
	}
	if g.Admitted() != 3 || g.Uncounted() != 4 {
		t.Fatalf("admitted %d, uncounted %d; want 3, 4 (3 enters and the counted ticket's leave)", g.Admitted(), g.Uncounted())
	}
	if n := len(logs.records(t, "capacity: Redis unreachable; going ahead uncounted (fail open)")); n != 1 {
		t.Fatalf("%d fail-open warnings, want 1:\n%s", n, logs.String())
	}
	if recs := logs.records(t, "call_admitted"); len(recs) != 3 || recs[2]["uncounted"] != true || recs[2]["call_id"] != "call-c" {
		t.Fatalf("call_admitted records without Redis: %v", recs)
	}
	if _, err := g.InUse(ctx); err == nil {
		t.Fatal("InUse without Redis: no error")
	}
}
