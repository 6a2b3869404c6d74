package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// liveBundle serves the live-call routes over real Redis: transcribers
// "vox" and "echo" (limit 1 each), voices "v1" and "v2" (limit 1 each);
// agent "dana" uses all four, agent "out" transcriber "vox" only.
type liveBundle struct {
	httpBundle
	rdb    redis.UniversalClient
	prefix string
	dialer *live.Dialer
}

var liveAgents = map[string]live.CallProviders{
	"dana": {STT: []string{"vox", "echo"}, TTS: []string{"v1", "v2"}},
	"out":  {STT: []string{"vox"}},
	"mute": {STT: []string{"vox"}},
}

func liveServe(t *testing.T, rdb redis.UniversalClient, prefix string) liveBundle {
	t.Helper()
	leases, err := capacity.New(captest.OnRedis(t, rdb, prefix), capacity.Config{Limits: map[string]capacity.ProviderLimit{
		"vox/stt": {Limit: 1}, "echo/stt": {Limit: 1}, "v1/tts": {Limit: 1}, "v2/tts": {Limit: 1}}})
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
	srv := httptest.NewServer(httpapi.NewHandler(leases, nil, httpapi.Options{Agents: liveAgents, Dialer: d, Timeline: tl}))
	t.Cleanup(srv.Close)
	return liveBundle{httpBundle: httpBundle{url: srv.URL, leases: leases}, rdb: rdb, prefix: prefix, dialer: d}
}

func (b liveBundle) hold(t *testing.T, provider, kind string) capacity.Lease {
	t.Helper()
	l, g := b.leases.Acquire(context.Background(), capacity.Request{Provider: provider, Kind: kind, Holder: "other"})
	if !g.Granted {
		t.Fatalf("holding %s/%s: %+v", provider, kind, g)
	}
	return l
}

func (b liveBundle) timeline(t *testing.T, callID string) []map[string]any {
	t.Helper()
	code, got, _ := b.do(t, "GET", "/v1/calls/"+callID+"/timeline", "")
	if code != 200 || got["call_id"] != callID {
		t.Fatalf("timeline of %s: %d %v", callID, code, got)
	}
	var out []map[string]any
	for _, e := range got["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// wantKinds checks that events have kinds want, in order, at
// non-decreasing times.
func wantKinds(t *testing.T, events []map[string]any, want ...string) {
	t.Helper()
	if len(events) != len(want) {
		t.Fatalf("events %v, want kinds %v", events, want)
	}
	var last time.Time
	for i, e := range events {
		at, err := time.Parse(time.RFC3339Nano, e["at"].(string))
		if e["kind"] != want[i] || err != nil || at.Before(last) || e["detail"] == "" {
			t.Fatalf("event %d %v, want kind %s at or after %s", i, e, want[i], last)
		}
		last = at
	}
}

// A call that connected over the limit, overflowed to a fallback voice
// and waited for a voice shows each event, in order, on its timeline.
func TestHTTPCallTimeline(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	b := liveServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"))
	b.hold(t, "vox", "stt")
	b.hold(t, "echo", "stt")
	v1 := b.hold(t, "v1", "tts")

	code, got, _ := b.do(t, "POST", "/v1/calls/c1/transcriber", `{"agent":"dana"}`)
	if code != 200 || got["over_limit"] != true || got["provider"] != "vox" {
		t.Fatalf("transcriber: %d %v", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/calls/c1/voice/start", `{"agent":"dana"}`)
	if code != 200 || got["provider"] != "v2" || got["fell_back"] != true || got["over_limit"] != false || got["lease"] == nil || got["waited_ms"] != float64(0) {
		t.Fatalf("voice start with v1 full: %d %v", code, got)
	}
	overflowLease := got["lease"]
	// Both voices busy now: the next reply waits until v1 frees up.
	freed := time.AfterFunc(100*time.Millisecond, func() { b.leases.Release(context.Background(), v1) })
	defer freed.Stop()
	code, got, _ = b.do(t, "POST", "/v1/calls/c1/voice/start", `{"agent":"dana"}`)
	if code != 200 || got["provider"] != "v1" || got["fell_back"] != false || got["over_limit"] != false || got["waited_ms"].(float64) <= 0 {
		t.Fatalf("voice start with every voice full: %d %v", code, got)
	}
	for _, l := range []any{overflowLease, got["lease"]} {
		if code, got, _ := b.do(t, "POST", "/v1/calls/c1/voice/done", mustJSON(t, map[string]any{"lease": l})); code != 204 {
			t.Fatalf("voice done: %d %v", code, got)
		}
	}
	events := b.timeline(t, "c1")
	wantKinds(t, events, live.EventOverLimitConnect, live.EventVoiceOverflow, live.EventVoiceWait)
	if events[0]["provider"] != "vox" || events[1]["provider"] != "v2" || events[2]["provider"] != "v1" {
		t.Fatalf("providers of %v", events)
	}
	if code, got, _ := b.do(t, "GET", "/v1/calls/unknown-call/timeline", ""); code != 404 || errType(got) != "not_found" {
		t.Fatalf("the timeline of a call with no events: %d %v, want 404", code, got)
	}
}

// Dialling over HTTP: reserved at once with room, else queued (202) in
// order; answered hands the reservation over; an end releases and
// re-checks; an unanswered end gives the reservation back. Every step is
// on the call's timeline.
func TestHTTPDialQueue(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	b := liveServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.dialer.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })

	code, got, _ := b.do(t, "POST", "/v1/calls/d1/dial", `{"agent":"out"}`)
	tr, _ := got["transcriber"].(map[string]any)
	if code != 200 || got["state"] != "reserved" || tr["provider"] != "vox" || tr["lease"] == nil {
		t.Fatalf("dial with room: %d %v", code, got)
	}
	for i, id := range []string{"d2", "d3"} {
		code, got, _ = b.do(t, "POST", "/v1/calls/"+id+"/dial", `{"agent":"out"}`)
		if code != 202 || got["state"] != "queued" || got["waiting_for"] != live.WaitingForCapacity || got["position"] != float64(i+1) || got["queued_at"] == nil {
			t.Fatalf("dial %s with vox reserved: %d %v", id, code, got)
		}
	}
	if code, got, _ = b.do(t, "GET", "/v1/calls/d2/dial", ""); code != 202 || got["position"] != float64(1) {
		t.Fatalf("state of d2: %d %v", code, got)
	}
	code, got, _ = b.do(t, "GET", "/v1/dial-queue", "")
	calls, _ := got["calls"].([]any)
	if code != 200 || len(calls) != 2 || calls[0].(map[string]any)["call_id"] != "d2" || calls[0].(map[string]any)["agent"] != "out" ||
		calls[1].(map[string]any)["position"] != float64(2) {
		t.Fatalf("dial queue: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/d2/answered", ""); code != 409 || errType(got) != "not_reserved" {
		t.Fatalf("answer a queued call: %d %v", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/calls/d1/answered", "")
	if tr, _ := got["transcriber"].(map[string]any); code != 200 || tr["provider"] != "vox" || tr["lease"] == nil {
		t.Fatalf("answered d1: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/d1/ended", ""); code != 204 {
		t.Fatalf("ended d1: %d %v", code, got)
	}
	// The end re-checked the queue: d2 (first in) is reserved, d3 waits.
	code, got, _ = b.do(t, "GET", "/v1/calls/d2/dial?wait_ms=10000", "")
	if code != 200 || got["state"] != "reserved" {
		t.Fatalf("d2 after d1 ended: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "GET", "/v1/calls/d3/dial", ""); code != 202 || got["position"] != float64(1) {
		t.Fatalf("d3 after d1 ended: %d %v", code, got)
	}
	// d2 ends unanswered: its reservation goes to d3.
	if code, got, _ = b.do(t, "POST", "/v1/calls/d2/ended", ""); code != 204 {
		t.Fatalf("ended d2: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "GET", "/v1/calls/d3/dial?wait_ms=10000", ""); code != 200 || got["state"] != "reserved" {
		t.Fatalf("d3 after d2 ended: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "GET", "/v1/calls/d2/dial", ""); code != 404 {
		t.Fatalf("d2 after its end: %d %v", code, got)
	}
	wantKinds(t, b.timeline(t, "d1"), live.EventDialReserved, live.EventAnswered, live.EventCallEnded)
	wantKinds(t, b.timeline(t, "d2"), live.EventDialQueued, live.EventDialReserved, live.EventUnansweredEnd)
	if code, got, _ = b.do(t, "POST", "/v1/calls/d3/ended", ""); code != 204 {
		t.Fatalf("ended d3: %d %v", code, got)
	}
	if n, err := rdb.ZCard(context.Background(), rediskit.Key(b.prefix, "vox/stt", "leases")).Result(); err != nil || n != 0 {
		t.Fatalf("vox leases %d %v after every call ended, want 0", n, err)
	}
}

func TestHTTPLiveCallValidation(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	b := liveServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"))
	long := strings.Repeat("c", capacity.IDMaxLen+1)
	for _, tc := range []struct {
		method, path, body string
		code               int
		field              string
	}{
		{"POST", "/v1/calls/c1/voice/start", `{}`, 400, "agent"},
		{"POST", "/v1/calls/c1/voice/start", `{"agent":7}`, 400, "agent"},
		{"POST", "/v1/calls/c1/voice/start", `{"agent":"nobody"}`, 404, "agent"},
		{"POST", "/v1/calls/c1/voice/start", `{"agent":"mute"}`, 404, "agent"}, // no voice
		{"POST", "/v1/calls/" + long + "/voice/start", `{"agent":"dana"}`, 400, "call_id"},
		{"POST", "/v1/calls/c%7Dx/dial", `{"agent":"out"}`, 400, "call_id"},
		{"POST", "/v1/calls/c1/voice/done", `{}`, 400, "lease"},
		{"POST", "/v1/calls/c1/voice/done", `{"lease":{"id":"x","provider":"vox","kind":"stt"}}`, 400, "lease.kind"},
		{"POST", "/v1/calls/c1/voice/done", `{"lease":{"provider":"v1","kind":"tts"}}`, 400, "lease.id"},
		{"POST", "/v1/calls/c1/dial", `{"agent":""}`, 400, "agent"},
		{"POST", "/v1/calls/c1/dial", `{"agent":"out","extra":1}`, 400, ""},
		{"GET", "/v1/calls/c1/dial?wait_ms=abc", "", 400, "wait_ms"},
		{"GET", "/v1/calls/c1/dial?wait_ms=30001", "", 400, "wait_ms"},
		{"GET", "/v1/calls/c1/dial", "", 404, ""},
		{"POST", "/v1/calls/c1/answered", "", 404, ""},
		{"GET", "/v1/calls/c1/ended", "", 405, ""},
		{"DELETE", "/v1/calls/c1/dial", "", 405, ""},
		{"POST", "/v1/dial-queue", "", 405, ""},
		{"GET", "/v1/calls/" + long + "/timeline", "", 400, "call_id"},
	} {
		code, got, _ := b.do(t, tc.method, tc.path, tc.body)
		errObj, _ := got["error"].(map[string]any)
		if code != tc.code || (tc.field != "" && errObj["field"] != tc.field) {
			t.Errorf("%s %.40s %s: %d %v, want %d naming %q", tc.method, tc.path, tc.body, code, got, tc.code, tc.field)
		}
	}
	// Without a Dialer or a Timeline the routes say so.
	srv := httptest.NewServer(httpapi.NewHandler(b.leases, nil, httpapi.Options{Agents: liveAgents}))
	defer srv.Close()
	bare := httpBundle{url: srv.URL}
	for _, p := range [][2]string{{"POST", "/v1/calls/c1/dial"}, {"GET", "/v1/dial-queue"}, {"GET", "/v1/calls/c1/timeline"}, {"POST", "/v1/calls/c1/ended"}} {
		body := ""
		if p[0] == "POST" {
			body = `{"agent":"out"}`
		}
		if code, got, _ := bare.do(t, p[0], p[1], body); code != http.StatusNotImplemented {
			t.Errorf("%s %s without a Dialer: %d %v, want 501", p[0], p[1], code, got)
		}
	}
	// An organisation's token does not read every organisation's queue.
	orgSrv := httptest.NewServer(httpapi.NewHandler(b.leases, nil, httpapi.Options{Agents: liveAgents, Dialer: b.dialer,
		Authenticate: func(context.Context, string) (string, bool, bool, error) { return "acme", false, true, nil }}))
	defer orgSrv.Close()
	if code, got, _ := (httpBundle{url: orgSrv.URL, token: "t"}).do(t, "GET", "/v1/dial-queue", ""); code != http.StatusForbidden {
		t.Errorf("dial queue with an organisation's token: %d %v, want 403", code, got)
	}
}

// With Redis unreachable, a call's voice, dial, answer and end go ahead
// uncounted, never 5xx; the operator's reads say Redis is down.
func TestHTTPLiveCallsFailOpen(t *testing.T) {
	t.Parallel()
	rdb := failFastClient(t, "redis://127.0.0.1:1/0")
	b := liveServe(t, rdb, "unreachable")

	code, got, _ := b.do(t, "POST", "/v1/calls/c1/voice/start", `{"agent":"dana"}`)
	if code != 200 || got["provider"] != "v1" || got["over_limit"] != false || got["lease"].(map[string]any)["counted"] != false {
		t.Fatalf("voice start: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/c1/voice/done", mustJSON(t, map[string]any{"lease": got["lease"]})); code != 204 {
		t.Fatalf("voice done: %d %v", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/calls/c1/dial", `{"agent":"out"}`)
	if code != 200 || got["state"] != "reserved" || got["uncounted"] != true {
		t.Fatalf("dial: %d %v", code, got)
	}
	for _, p := range []string{"/v1/calls/c1/dial", "/v1/calls/c1/dial?wait_ms=200"} {
		if code, got, _ = b.do(t, "GET", p, ""); code != 200 || got["uncounted"] != true {
			t.Fatalf("GET %s: %d %v", p, code, got)
		}
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/c1/answered", ""); code != 200 || got["uncounted"] != true {
		t.Fatalf("answered: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/c1/transcriber", `{"agent":"dana"}`); code != 200 {
		t.Fatalf("transcriber: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/c1/ended", ""); code != 204 {
		t.Fatalf("ended: %d %v", code, got)
	}
	for _, p := range []string{"/v1/calls/c1/timeline", "/v1/dial-queue"} {
		if code, got, _ = b.do(t, "GET", p, ""); code != 503 || errType(got) != "unavailable" {
			t.Fatalf("GET %s: %d %v", p, code, got)
		}
	}
}

// After Redis loses everything (a wipe, a failover to an empty replica),
// ending a call is a no-op answered 204, twice as once, and new calls dial
// against the fresh, empty counters.
func TestHTTPCallEndedAfterRedisWiped(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	b := liveServe(t, rdb, testredis.Prefix(t, rdb, "httpapi"))
	if code, got, _ := b.do(t, "POST", "/v1/calls/w1/dial", `{"agent":"out"}`); code != 200 || got["state"] != "reserved" {
		t.Fatalf("dial w1: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/calls/w1/answered", ""); code != 200 {
		t.Fatalf("answered w1: %d %v", code, got)
	}
	testredis.DeleteKeys(rdb, b.prefix)
	if n, err := rdb.Keys(context.Background(), b.prefix+":*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("keys left after the wipe: %v, %v", n, err)
	}
	for range 2 {
		if code, got, _ := b.do(t, "POST", "/v1/calls/w1/ended", ""); code != 204 {
			t.Fatalf("ended w1 after the wipe: %d %v, want 204", code, got)
		}
	}
	if code, got, _ := b.do(t, "POST", "/v1/calls/w2/dial", `{"agent":"out"}`); code != 200 || got["state"] != "reserved" {
		t.Fatalf("dial w2 after the wipe: %d %v, want reserved on the empty counters", code, got)
	}
	if n, err := rdb.ZCard(context.Background(), rediskit.Key(b.prefix, "vox/stt", "leases")).Result(); err != nil || n != 1 {
		t.Fatalf("vox leases %d %v after the wipe and one new dial, want 1", n, err)
	}
}
