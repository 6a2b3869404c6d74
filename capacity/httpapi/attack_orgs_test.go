package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// orgsBundle serves the capacity API to two organisations' tokens
// (northline "tok-n", harbor "tok-h") and an admin ("tok-a") over real
// Redis: transcriber "vox" (limit 4), voice "v1" (limit 2); agent "out"
// dials with "vox" and speaks with "v1".
type orgsBundle struct {
	n, h, a httpBundle
	leases  *capacity.Leases
	rdb     redis.UniversalClient
	prefix  string
}

func orgsServe(t *testing.T, rdb redis.UniversalClient, prefix string, opts httpapi.Options) orgsBundle {
	t.Helper()
	leases, err := capacity.New(captest.OnRedis(t, rdb, prefix), capacity.Config{Limits: map[string]capacity.ProviderLimit{
		"vox/stt": {Limit: 4}, "v1/tts": {Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := live.NewTimeline(captest.OnRedis(t, rdb, prefix), live.TimelineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := live.NewDialer(captest.OnRedis(t, rdb, prefix), leases, live.DialerConfig{Timeline: tl, DetachLeases: true})
	if err != nil {
		t.Fatal(err)
	}
	opts.Agents = map[string]live.CallProviders{"out": {STT: []string{"vox"}, TTS: []string{"v1"}}}
	opts.Dialer, opts.Timeline = d, tl
	opts.Authenticate = func(_ context.Context, bearer string) (string, bool, bool, error) {
		switch bearer {
		case "tok-n":
			return "northline", false, true, nil
		case "tok-h":
			return "harbor", false, true, nil
		case "tok-a":
			return "", true, true, nil
		}
		return "", false, false, nil
	}
	srv := httptest.NewServer(httpapi.NewHandler(leases, nil, opts))
	t.Cleanup(srv.Close)
	as := func(tok string) httpBundle { return httpBundle{url: srv.URL, leases: leases, token: tok} }
	return orgsBundle{n: as("tok-n"), h: as("tok-h"), a: as("tok-a"), leases: leases, rdb: rdb, prefix: prefix}
}

func (b orgsBundle) inUse(t *testing.T, provider, kind string) int {
	t.Helper()
	n, err := b.rdb.ZCard(context.Background(), b.prefix+":{"+provider+"/"+kind+"}:leases").Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// Issue 23, finding 1: another organisation's live calls and leases are
// 404 on every /v1/calls/* and /v1/leases* route, touch nothing, and one
// organisation cannot take every slot of a provider through /v1/leases.
func TestAttackLiveCallsAndLeasesAcrossOrgs(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	b := orgsServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"), httpapi.Options{})
	n, h, admin := b.n, b.h, b.a

	code, dial, _ := n.do(t, "POST", "/v1/calls/nl-call-1/dial", `{"agent":"out"}`)
	if code != 200 || dial["state"] != "reserved" || dial["call_id"] != "nl-call-1" {
		t.Fatalf("northline dials: %d %v", code, dial)
	}
	tLease := dial["transcriber"].(map[string]any)["lease"].(map[string]any)
	if id := tLease["id"].(string); !strings.HasPrefix(id, "northline/nl-call-1#") || tLease["holder"] != "northline/nl-call-1" {
		t.Fatalf("northline's transcriber lease is not named for northline: %v", tLease)
	}
	code, voice, _ := n.do(t, "POST", "/v1/calls/nl-call-1/voice/start", `{"agent":"out"}`)
	if code != 200 || voice["lease"] == nil {
		t.Fatalf("northline's voice: %d %v", code, voice)
	}
	vLease := voice["lease"]

	// harbor, naming northline's call or its leases, finds nothing.
	for _, try := range []struct{ method, path, body string }{
		{"GET", "/v1/calls/nl-call-1/dial", ""},
		{"GET", "/v1/calls/nl-call-1/dial?wait_ms=300", ""},
		{"GET", "/v1/calls/nl-call-1/timeline", ""},
		{"POST", "/v1/calls/nl-call-1/answered", ""},
		{"GET", "/v1/calls/nl-call-1/dial?org=northline", ""},
		{"POST", "/v1/calls/nl-call-1/ended?org=northline", ""},
		{"POST", "/v1/leases/release", mustJSON(t, map[string]any{"lease": tLease})},
		{"POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": []any{tLease}})},
		{"POST", "/v1/calls/nl-call-1/voice/done", mustJSON(t, map[string]any{"lease": vLease})},
		{"POST", "/v1/calls/hb-call-9/voice/done", mustJSON(t, map[string]any{"lease": vLease})},
	} {
		if code, got, _ := h.do(t, try.method, try.path, try.body); code != 404 || errType(got) != "not_found" {
			t.Errorf("harbor: %s %s: %d %v, want 404 not_found", try.method, try.path, code, got)
		}
	}
	// harbor's "ended" of the same id ends harbor's call of that id (it has
	// none: 204, as for any call the dial queue does not know, such as an
	// inbound call); northline's call is untouched.
	if code, got, _ := h.do(t, "POST", "/v1/calls/nl-call-1/ended", ""); code != 204 {
		t.Fatalf("harbor's ended of its own nl-call-1: %d %v", code, got)
	}
	if code, got, _ := n.do(t, "GET", "/v1/calls/nl-call-1/dial", ""); code != 200 || got["state"] != "reserved" {
		t.Fatalf("northline's call after harbor's attempts: %d %v, want still reserved", code, got)
	}
	if got := b.inUse(t, "vox", "stt"); got != 1 {
		t.Fatalf("vox leases after harbor's attempts: %d, want northline's 1", got)
	}
	if got := b.inUse(t, "v1", "tts"); got != 1 {
		t.Fatalf("v1 leases after harbor's attempts: %d, want northline's 1", got)
	}
	code, got, _ := n.do(t, "POST", "/v1/calls/nl-call-1/answered", "")
	if code != 200 || got["call_id"] != "nl-call-1" {
		t.Fatalf("northline answers its call: %d %v", code, got)
	}
	code, got, _ = n.do(t, "GET", "/v1/calls/nl-call-1/timeline", "")
	if code != 200 || got["call_id"] != "nl-call-1" || len(got["events"].([]any)) == 0 {
		t.Fatalf("northline's timeline: %d %v", code, got)
	}
	// The admin reaches northline's call by naming the organisation.
	if code, got, _ := admin.do(t, "GET", "/v1/calls/nl-call-1/dial?org=northline", ""); code != 200 || got["state"] != "answered" {
		t.Fatalf("admin reads northline's call: %d %v", code, got)
	}
	if code, got, _ := admin.do(t, "GET", "/v1/calls/nl-call-1/dial", ""); code != 404 {
		t.Fatalf("admin, naming no organisation: %d %v, want 404 (the call is northline's)", code, got)
	}
	if code, got, _ := n.do(t, "GET", "/v1/calls/nl-call-1/dial?org=bad/org", ""); code != 400 || errField(got, "field") != "org" {
		t.Fatalf("a malformed org: %d %v, want 400 naming org", code, got)
	}

	// harbor takes vox leases as a hog: its quota (half of 4) stops it at
	// 2, although 1 more slot is free; northline's next dial gets one.
	hog := `{"provider":"vox","kind":"stt","holder":"hog","lane":"live"}`
	var hogLeases []any
	for i := range 2 {
		code, got, _ := h.do(t, "POST", "/v1/leases", hog)
		if code != 200 || got["granted"] != true || got["org_in_use"] != float64(i+1) || got["org_quota"] != float64(2) {
			t.Fatalf("harbor's lease %d: %d %v", i+1, code, got)
		}
		lease := got["lease"].(map[string]any)
		if !strings.HasPrefix(lease["id"].(string), "harbor/hog#") {
			t.Fatalf("harbor's lease is not named for harbor: %v", lease)
		}
		hogLeases = append(hogLeases, lease)
	}
	code, got, _ = h.do(t, "POST", "/v1/leases", hog)
	if code != 200 || got["granted"] != false || got["over_quota"] != true || got["in_use"] != float64(3) {
		t.Fatalf("harbor's third lease: %d %v, want refused over its quota", code, got)
	}
	if code, got, _ := n.do(t, "POST", "/v1/calls/nl-call-2/dial", `{"agent":"out"}`); code != 200 || got["state"] != "reserved" {
		t.Fatalf("northline's next dial beside harbor's hog: %d %v, want reserved", code, got)
	}
	// northline cannot give back harbor's leases either; harbor can.
	if code, got, _ := n.do(t, "POST", "/v1/leases/release", mustJSON(t, map[string]any{"lease": hogLeases[0]})); code != 404 {
		t.Fatalf("northline releases harbor's lease: %d %v, want 404", code, got)
	}
	if code, got, _ := h.do(t, "POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": hogLeases})); code != 200 || len(got["refreshed"].([]any)) != 2 {
		t.Fatalf("harbor refreshes its own leases: %d %v", code, got)
	}
	if code, got, _ := h.do(t, "POST", "/v1/leases/release", mustJSON(t, map[string]any{"lease": hogLeases[0]})); code != 204 {
		t.Fatalf("harbor releases its own lease: %d %v", code, got)
	}
	// A holder must be an id: a "/" would let one organisation's holder
	// pass for another's.
	if code, got, _ := admin.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"harbor/x","lane":"live"}`); code != 400 || errField(got, "field") != "holder" {
		t.Fatalf("a holder with a slash: %d %v, want 400 naming holder", code, got)
	}
	// The admin's dial queue names each call's organisation.
	{ // fill vox (northline 2, harbor 1, this 1) so that the next dial queues
		if code, got, _ := admin.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"fill","lane":"live"}`); code != 200 || got["granted"] != true {
			t.Fatalf("fill: %d %v", code, got)
		}
	}
	if code, got, _ := n.do(t, "POST", "/v1/calls/nl-call-3/dial", `{"agent":"out"}`); code != 202 || got["call_id"] != "nl-call-3" {
		t.Fatalf("northline's third dial: %d %v, want 202 queued", code, got)
	}
	code, got, _ = admin.do(t, "GET", "/v1/dial-queue", "")
	calls, _ := got["calls"].([]any)
	if code != 200 || len(calls) != 1 || calls[0].(map[string]any)["org"] != "northline" || calls[0].(map[string]any)["call_id"] != "nl-call-3" {
		t.Fatalf("dial queue: %d %v", code, got)
	}
}

// fillVox takes every vox slot (limit 4) as the admin, so that dials queue.
func (b orgsBundle) fillVox(t *testing.T) {
	t.Helper()
	for range 4 {
		if code, got, _ := b.a.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"fill","lane":"live"}`); code != 200 || got["granted"] != true {
			t.Fatalf("fill: %d %v", code, got)
		}
	}
	if code, got, _ := b.n.do(t, "POST", "/v1/calls/q-1/dial", `{"agent":"out"}`); code != 202 {
		t.Fatalf("dial: %d %v, want 202 queued", code, got)
	}
}

// Issue 23, finding 6: dial long-polls count against a cap (429 beyond
// it), and a read of a queued call's state that times out while Redis
// answers other reads is answered 503 busy, never a grant.
func TestAttackDialLongPollsBoundedNoGrantFromTimeouts(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	proxy := newStallProxy(t, testredis.URL())
	slow := failFastClient(t, proxy.url)
	b := orgsServe(t, slow, prefix, httpapi.Options{MaxDialWaiters: 2})
	b.fillVox(t)

	// Two long-polls wait; a third is refused at once while they do.
	var wg sync.WaitGroup
	var answered atomic.Int32
	for range 2 {
		wg.Go(func() {
			defer answered.Add(1)
			for { // a probe below may hold a place for a moment: retry
				code, got, _ := b.n.do(t, "GET", "/v1/calls/q-1/dial?wait_ms=4000", "")
				if code == 429 {
					continue
				}
				if code != 202 || got["state"] != "queued" {
					t.Errorf("a long-poll: %d %v, want 202 queued at its end", code, got)
				}
				return
			}
		})
	}
	refused := false
	for !refused && answered.Load() == 0 {
		code, got, hdr := b.n.do(t, "GET", "/v1/calls/q-1/dial?wait_ms=100", "")
		switch {
		case code == 429 && errType(got) == "too_many_waiters" && hdr.Get("Retry-After") == "1":
			refused = true
		case code != 202:
			t.Fatalf("a third long-poll: %d %v", code, got)
		}
	}
	wg.Wait()
	if !refused {
		t.Fatal("a third long-poll was never refused while two waited (MaxDialWaiters 2)")
	}
	// Without wait_ms a read is not a long-poll and is not capped.
	if code, got, _ := b.n.do(t, "GET", "/v1/calls/q-1/dial", ""); code != 202 {
		t.Fatalf("a plain read: %d %v", code, got)
	}

	// Redis stops answering this server's reads (as when its own load
	// makes them time out): the queued call is answered busy, not granted.
	proxy.stall(true)
	code, got, hdr := b.n.do(t, "GET", "/v1/calls/q-1/dial?wait_ms=1000", "")
	if code != 503 || errType(got) != "busy" || hdr.Get("Retry-After") != "1" {
		t.Fatalf("a read that timed out right after a good one: %d %v, want 503 busy (never a grant)", code, got)
	}
	// Once no read has succeeded for a while, it is an outage: fail open.
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, got, _ := b.n.do(t, "GET", "/v1/calls/q-1/dial", "")
		if code == 200 {
			if got["state"] != "reserved" || got["uncounted"] != true {
				t.Fatalf("after a sustained outage: %d %v, want 200 reserved uncounted", code, got)
			}
			break
		}
		if code != 503 || errType(got) != "busy" {
			t.Fatalf("during the outage: %d %v", code, got)
		}
		if time.Now().After(deadline) {
			t.Fatal("a sustained outage never failed open")
		}
	}
}

// Issue 23, finding 11: when the server begins to shut down, a dial
// long-poll answers the state it last read at once, instead of being cut
// without an answer.
func TestAttackLongPollsAnsweredOnShutdown(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	shutdown := make(chan struct{})
	b := orgsServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"), httpapi.Options{MaxDialWaiters: 1, Shutdown: shutdown})
	b.fillVox(t)
	done := waitInPlace(func() (int, map[string]any) {
		code, got, _ := b.n.do(t, "GET", "/v1/calls/q-1/dial?wait_ms=30000", "")
		return code, got
	}, func(code int, _ map[string]any) bool { return code == 429 })
	// The long-poll is waiting once a second one is refused (cap 1).
	untilRefused(t, func() (int, map[string]any) {
		code, got, _ := b.n.do(t, "GET", "/v1/calls/q-1/dial?wait_ms=50", "")
		return code, got
	}, func(code int, _ map[string]any) bool { return code == 429 }, 202)
	close(shutdown)
	a := <-done
	if a.code != 202 || a.got["state"] != "queued" || a.got["call_id"] != "q-1" || a.took >= 25*time.Second {
		t.Fatalf("the long-poll at shutdown: %d %v after %s, want 202 queued at once", a.code, a.got, a.took)
	}
	// Slot, start and gate waits: TestAttackSlotWaitAnsweredOnShutdown;
	// the real serve command: TestAttackServeLongPollAnsweredOnShutdown.
}

// answer is a waiting request's answer and how long it took.
type answer struct {
	code int
	got  map[string]any
	took time.Duration
}

// waitInPlace sends ask in a goroutine, again whenever refused says a
// probe held the only place for a moment, and delivers its first other
// answer.
func waitInPlace(ask func() (int, map[string]any), refused func(int, map[string]any) bool) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		for {
			start := time.Now()
			code, got := ask()
			if !refused(code, got) {
				done <- answer{code, got, time.Since(start)}
				return
			}
		}
	}()
	return done
}

// untilRefused probes until refused says the cap is full, so that the
// request of waitInPlace is waiting; any answer but refused or want fails.
func untilRefused(t *testing.T, probe func() (int, map[string]any), refused func(int, map[string]any) bool, want int) {
	t.Helper()
	for {
		code, got := probe()
		if refused(code, got) {
			return
		}
		if code != want {
			t.Fatalf("probe: %d %v, want %d until refused", code, got, want)
		}
	}
}

// stallProxy forwards to a Redis server (over TCP or a Unix socket) until
// stall(true): then it holds every byte clients send (new connections
// too), as a Redis that stops answering does.
type stallProxy struct {
	url     string
	stalled atomic.Bool
}

func newStallProxy(t *testing.T, redisURL string) *stallProxy {
	t.Helper()
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{url: fmt.Sprintf("redis://%s/%d", ln.Addr(), opt.DB)}
	// The accept loop ends before the forwards are waited for: a
	// connection accepted as the listener closes adds to conns before
	// Wait, never beside it.
	var conns sync.WaitGroup
	accepting := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-accepting; conns.Wait() })
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.forward(t, c, opt.Network, opt.Addr) })
		}
	}()
	return p
}

func (p *stallProxy) stall(on bool) { p.stalled.Store(on) }

func (p *stallProxy) forward(t *testing.T, c net.Conn, network, addr string) {
	defer c.Close()
	up, err := net.Dial(network, addr)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		for p.stalled.Load() { // hold the bytes: Redis never sees them
			select {
			case <-t.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if _, err := up.Write(buf[:n]); err != nil {
			return
		}
	}
}

// Issue 23, finding 11, for waits on call slots (the start rate and the
// admission gate wait through the same waitCtx): a slot request waiting
// when the shutdown begins answers 503 shutting_down at once.
func TestAttackSlotWaitAnsweredOnShutdown(t *testing.T) {
	t.Parallel()
	shutdown := make(chan struct{})
	b := httpSetup(t, httpapi.Options{MaxSlotWaiters: 1, Shutdown: shutdown}, true)
	for range 3 { // acme's cap
		if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 200 {
			t.Fatalf("slot: %d %v", code, got)
		}
	}
	busy := func(code int, got map[string]any) bool { return code == 503 && errType(got) == "busy" }
	done := waitInPlace(func() (int, map[string]any) {
		code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","timeout_ms":60000}`)
		return code, got
	}, busy)
	// The wait is in once a second one is refused busy (cap 1).
	untilRefused(t, func() (int, map[string]any) {
		code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","timeout_ms":50}`)
		return code, got
	}, busy, 409)
	close(shutdown)
	if a := <-done; a.code != 503 || errType(a.got) != "shutting_down" || a.took >= 50*time.Second {
		t.Fatalf("the slot wait at shutdown: %d %v after %s, want 503 shutting_down at once", a.code, a.got, a.took)
	}
}

// Long-polls of one call in one process share their reads of its state:
// 40 of them for 1 s make about one read per poll interval, not one each.
// The reads are counted exactly on the server's own Redis client (a hook
// counting HGETALL, the dial state's read), which no other test uses.
func TestDialLongPollsShareReads(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	reads := &hgetallCounter{}
	rdb.AddHook(reads)
	b := orgsServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"), httpapi.Options{})
	b.fillVox(t)
	before := reads.n.Load()
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if code, got, _ := b.n.do(t, "GET", "/v1/calls/q-1/dial?wait_ms=1000", ""); code != 202 {
				t.Errorf("long-poll: %d %v", code, got)
			}
		})
	}
	wg.Wait()
	// Unshared: 40 × ~10 = ~400 reads. Shared: one per 100 ms poll, ~10,
	// more when a busy machine spreads the polls out; never near 400.
	if n := reads.n.Load() - before; n >= 100 {
		t.Fatalf("40 long-polls of one call for 1 s made %d dial state reads, want them shared (unshared: ~400)", n)
	}
}

// hgetallCounter is a go-redis hook that counts HGETALL commands.
type hgetallCounter struct{ n atomic.Int64 }

func (c *hgetallCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *hgetallCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *hgetallCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *hgetallCounter) count(cmd redis.Cmder) {
	if strings.EqualFold(cmd.Name(), "hgetall") {
		c.n.Add(1)
	}
}
