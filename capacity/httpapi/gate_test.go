package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// gateOn is a gate of size over rdb under prefix.
func gateOn(t *testing.T, rdb redis.UniversalClient, prefix string, size int, ttl time.Duration) *live.Gate {
	t.Helper()
	g, err := live.NewGate(captest.OnRedis(t, rdb, prefix), live.GateConfig{Size: size, Ceilings: map[string]int{"vendor_plan": 40},
		Timeout: 50 * time.Millisecond, TicketTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func gateInUse(t *testing.T, g *live.Gate) int {
	t.Helper()
	n, err := g.InUse(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The gate over HTTP: enter gives a ticket; a full gate answers 429
// gate_full; leave frees the place at once, through another server
// sharing the gate too.
func TestHTTPGate(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	g := gateOn(t, rdb, prefix, 2, 0)
	b := httpServe(t, rdb, prefix, httpapi.Options{Gate: g}, false)
	other := httpServe(t, rdb, prefix, httpapi.Options{Gate: gateOn(t, rdb, prefix, 2, 0)}, false)
	var tickets []string
	for i, body := range []string{`{"call_id":"call-1"}`, `{}`} {
		code, got, _ := b.do(t, "POST", "/v1/gate/enter", body)
		tk, _ := got["ticket"].(string)
		exp, _ := got["expires_at"].(string)
		at, perr := time.Parse(time.RFC3339Nano, exp)
		if code != 200 || len(tk) != 32 || perr != nil || time.Until(at) < 10*time.Minute || got["uncounted"] != false ||
			got["in_use"] != float64(i+1) || got["size"] != 2.0 {
			t.Fatalf("enter %d: %d %v", i+1, code, got)
		}
		if (i == 0) != (got["call_id"] == "call-1") {
			t.Fatalf("enter %d answers call_id %v", i+1, got["call_id"])
		}
		tickets = append(tickets, tk)
	}
	code, got, hdr := other.do(t, "POST", "/v1/gate/enter", `{"timeout_ms":0,"call_id":"call-3"}`)
	if code != 429 || errType(got) != "gate_full" || hdr.Get("Retry-After") == "" {
		t.Fatalf("full gate through the other server: %d %v, want 429 gate_full with Retry-After", code, got)
	}
	if e := got["error"].(map[string]any); e["size"] != 2.0 || e["in_use"] != 2.0 {
		t.Fatalf("gate_full names %v, want size 2, in_use 2", e)
	}
	// Left through the other server, which did not give it.
	if code, got, _ := other.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+tickets[0]+`"}`); code != 204 {
		t.Fatalf("leave through another server: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+tickets[0]+`"}`); code != 404 || errType(got) != "unknown_ticket" {
		t.Fatalf("leave twice: %d %v, want 404 unknown_ticket", code, got)
	}
	if n := gateInUse(t, g); n != 1 {
		t.Fatalf("in use after a leave = %d, want 1", n)
	}
	if code, got, _ := b.do(t, "POST", "/v1/gate/enter", `{"timeout_ms":0}`); code != 200 {
		t.Fatalf("enter after a leave: %d %v", code, got)
	}
	for _, c := range []struct{ path, body, field string }{
		{"/v1/gate/enter", `{"timeout_ms":120001}`, "timeout_ms"},
		{"/v1/gate/enter", `{"timeout_ms":-1}`, "timeout_ms"},
		{"/v1/gate/enter", `{"call_id":"a b"}`, "call_id"},
		{"/v1/gate/enter", `{"call_id":"` + strings.Repeat("c", 129) + `"}`, "call_id"},
		{"/v1/gate/leave", `{}`, "ticket"},
		{"/v1/gate/leave", `{"ticket":"short"}`, "ticket"},
		{"/v1/gate/leave", `{"ticket":"` + strings.Repeat("Z", 32) + `"}`, "ticket"},
	} {
		code, got, _ := b.do(t, "POST", c.path, c.body)
		if code != 400 || got["error"].(map[string]any)["field"] != c.field {
			t.Fatalf("%s %s: %d %v, want 400 naming %s", c.path, c.body, code, got, c.field)
		}
	}
	off := httpSetup(t, httpapi.Options{}, false)
	if code, got, _ := off.do(t, "POST", "/v1/gate/enter", `{}`); code != 501 || errType(got) != "gate_disabled" {
		t.Fatalf("without a gate: %d %v, want 501", code, got)
	}
}

// A ticket whose client died is reclaimed when its TTL passes: a caller
// waiting at the full gate gets in then, and the dead ticket is unknown.
func TestHTTPGateTicketExpires(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	g := gateOn(t, rdb, prefix, 1, 300*time.Millisecond)
	b := httpServe(t, rdb, prefix, httpapi.Options{Gate: g}, false)
	code, got, _ := b.do(t, "POST", "/v1/gate/enter", `{"call_id":"dead-call"}`)
	if code != 200 {
		t.Fatalf("enter: %d %v", code, got)
	}
	dead := got["ticket"].(string)
	// The client holding dead never leaves; this one waits up to 60 s.
	code, got, _ = b.do(t, "POST", "/v1/gate/enter", `{"timeout_ms":60000}`)
	if code != 200 {
		t.Fatalf("enter while the dead ticket held the gate: %d %v, want 200 once it expired", code, got)
	}
	if w, _ := got["waited_ms"].(float64); w <= 0 {
		t.Fatalf("waited_ms %v, want > 0 (it waited for the dead ticket's TTL)", got["waited_ms"])
	}
	if code, got, _ := b.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+dead+`"}`); code != 404 || !strings.Contains(got["error"].(map[string]any)["message"].(string), "expired") {
		t.Fatalf("leave of the expired ticket: %d %v, want 404 saying it may have expired", code, got)
	}
	if code, _, _ := b.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+got["ticket"].(string)+`"}`); code != 204 {
		t.Fatalf("leave of the live ticket: %d", code)
	}
	if n := gateInUse(t, g); n != 0 || g.Reclaimed() != 1 {
		t.Fatalf("in use = %d, reclaimed %d; want 0, 1", n, g.Reclaimed())
	}
}

// A ticket belongs to the organisation whose token entered: another
// organisation's leave is 404 and frees nothing; an admin's leaves it.
func TestHTTPGateOrganisations(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	g := gateOn(t, rdb, prefix, 3, 0)
	b := orgsServe(t, rdb, prefix, httpapi.Options{Gate: g})
	var tickets []string
	for range 2 {
		code, got, _ := b.n.do(t, "POST", "/v1/gate/enter", `{"call_id":"call-1"}`)
		if code != 200 {
			t.Fatalf("northline's enter: %d %v", code, got)
		}
		tickets = append(tickets, got["ticket"].(string))
	}
	if code, got, _ := b.h.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+tickets[0]+`"}`); code != 404 || errType(got) != "unknown_ticket" {
		t.Fatalf("harbor leaving northline's ticket: %d %v, want 404", code, got)
	}
	if n := gateInUse(t, g); n != 2 {
		t.Fatalf("in use %d after another organisation's leave, want 2", n)
	}
	if code, _, _ := b.n.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+tickets[0]+`"}`); code != 204 {
		t.Fatalf("northline leaving its own ticket: %d", code)
	}
	if code, _, _ := b.a.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+tickets[1]+`"}`); code != 204 {
		t.Fatalf("an admin leaving northline's ticket: %d", code)
	}
	if n := gateInUse(t, g); n != 0 {
		t.Fatalf("in use %d, want 0", n)
	}
}

// With Redis unreachable, enter admits uncounted and leave answers 204.
func TestHTTPGateFailOpen(t *testing.T) {
	t.Parallel()
	rdb := failFastClient(t, "redis://127.0.0.1:1/0")
	b := httpServe(t, rdb, "unreachable", httpapi.Options{Gate: gateOn(t, rdb, "unreachable", 1, 0)}, false)
	for range 3 {
		code, got, _ := b.do(t, "POST", "/v1/gate/enter", `{"timeout_ms":1000,"call_id":"call-x"}`)
		tk, _ := got["ticket"].(string)
		if code != 200 || got["uncounted"] != true || !strings.HasPrefix(tk, live.UncountedTicketPrefix) || got["expires_at"] != nil {
			t.Fatalf("enter without Redis: %d %v, want 200 uncounted", code, got)
		}
		if code, got, _ := b.do(t, "POST", "/v1/gate/leave", `{"ticket":"`+tk+`"}`); code != 204 {
			t.Fatalf("leave of an uncounted ticket: %d %v", code, got)
		}
	}
	if code, got, _ := b.do(t, "POST", "/v1/gate/leave", `{"ticket":"0123456789abcdef0123456789abcdef"}`); code != 204 {
		t.Fatalf("leave without Redis: %d %v, want 204 (fail open)", code, got)
	}
}
