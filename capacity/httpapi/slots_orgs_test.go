package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/internal/testredis"
)

// Organisation "acme" (cap 3) has a call bound; another organisation names
// the same call id: it can neither release acme's slot nor learn that the
// call exists, and acme stays held to its cap.
func TestHTTPCallReleaseOtherOrgRefused(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)
	var held []map[string]any
	for range 3 {
		code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`)
		if code != 200 {
			t.Fatalf("acquire: %d %v", code, got)
		}
		held = append(held, got["slot"].(map[string]any))
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": held[0], "call_id": "c-1"})); code != 204 {
		t.Fatalf("bind: %d %v", code, got)
	}
	// rival has no c-1: its release is the idempotent 204 of a call never
	// bound (the same answer whether acme's c-1 exists or not), and
	// releases nothing of acme's.
	code, got, _ := b.do(t, "POST", "/v1/calls/c-1/release", `{"org":"rival"}`)
	if code != 204 {
		t.Fatalf("release of acme's call id by rival: %d %v, want 204 releasing nothing", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/calls/never-bound/release", `{"org":"rival"}`); code != 204 {
		t.Fatalf("release of a call id nobody bound: %d %v, want the same 204", code, got)
	}
	// acme still holds 3 of 3: a fourth call is refused.
	if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 409 || errType(got) != "no_slot" {
		t.Fatalf("acme's fourth call after rival's release: %d %v, want 409 no_slot", code, got)
	}
	// The rival's own call of the same id is its own binding.
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"rival"}`)
	if code != 200 {
		t.Fatalf("rival acquire: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": got["slot"], "call_id": "c-1"})); code != 204 {
		t.Fatalf("rival bind of its own c-1: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/calls/c-1/release", `{"org":"rival"}`); code != 204 {
		t.Fatalf("rival release of its own c-1: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 409 {
		t.Fatalf("acme after rival released its own c-1: %d %v, want 409", code, got)
	}
	// acme's release frees acme's slot; a second one finds nothing.
	if code, got, _ := b.do(t, "POST", "/v1/calls/c-1/release", `{"org":"acme"}`); code != 204 {
		t.Fatalf("acme release: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/calls/c-1/release", `{"org":"acme"}`); code != 204 {
		t.Fatalf("second acme release: %d %v, want 204 (idempotent)", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 200 {
		t.Fatalf("acme acquire after its release: %d %v", code, got)
	}
}

// A slot the client made up (no such slot in Redis, expiry ~970 years
// ahead) cannot take a call id; a real slot sent back with a forged expiry
// binds only for the slot's real life in Redis.
func TestHTTPBindForgedSlot(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	b := httpServe(t, rdb, prefix, httpapi.Options{}, true)
	forged := map[string]any{"org": "acme", "campaign": "", "id": "0123456789abcdef0123456789abcdef", "uncounted": false, "expires": "2996-01-01T00:00:00Z"}
	code, got, _ := b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": forged, "call_id": "victim"}))
	if code != 409 || errType(got) != "slot_not_held" {
		t.Fatalf("bind of a made-up slot: %d %v, want 409 slot_not_held", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme"}`)
	if code != 200 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": got["slot"], "call_id": "victim"})); code != 204 {
		t.Fatalf("victim's own bind after the forged one: %d %v", code, got)
	}

	// A real slot with its expiry pushed out: the binding lives no longer
	// than the slot does in Redis.
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme"}`)
	if code != 200 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	real := got["slot"].(map[string]any)
	real["expires"] = "2996-01-01T00:00:00Z"
	if code, got, _ := b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": real, "call_id": "c-2"})); code != 204 {
		t.Fatalf("bind with forged expiry: %d %v", code, got)
	}
	keys, err := rdb.Keys(t.Context(), prefix+":*c-2*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("binding keys of c-2: %v %v", keys, err)
	}
	if ttl := rdb.PTTL(t.Context(), keys[0]).Val(); ttl <= 0 || ttl > capacity.StaleAfterDefault {
		t.Fatalf("binding TTL = %s, want at most the slot's %s", ttl, capacity.StaleAfterDefault)
	}
}

func TestHTTPSlotIDsValidated(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)
	long := strings.Repeat("a", 60<<10)
	slot := func(org, campaign string) string {
		return mustJSON(t, map[string]any{"slot": map[string]any{"org": org, "campaign": campaign, "id": "0123456789abcdef0123456789abcdef"}, "call_id": "c"})
	}
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"org closing the hash tag", "/v1/slots", `{"org":"x}:camp:y"}`, "org"},
		{"60 KB org", "/v1/slots", `{"org":"` + long + `"}`, "org"},
		{"org over 128", "/v1/slots", `{"org":"` + strings.Repeat("o", 129) + `"}`, "org"},
		{"org with a space", "/v1/slots", `{"org":"ac me"}`, "org"},
		{"campaign with a brace", "/v1/slots", `{"org":"acme","campaign":"{x}"}`, "campaign"},
		{"bind org", "/v1/slots/bind", slot("x}:camp:y", ""), "slot.org"},
		{"bind campaign", "/v1/slots/bind", slot("acme", "a:b"), "slot.campaign"},
		{"bind call", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": map[string]any{"org": "acme", "id": "0123456789abcdef0123456789abcdef"}, "call_id": "c}x"}), "call_id"},
		{"bind slot id", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": map[string]any{"org": "acme", "id": "a b"}, "call_id": "c"}), "slot.id"},
		{"release org", "/v1/slots/release", mustJSON(t, map[string]any{"slot": map[string]any{"org": "x}y", "id": "a"}}), "slot.org"},
		{"call release without org", "/v1/calls/c/release", `{}`, "org"},
		{"call release org", "/v1/calls/c/release", `{"org":"x}:camp:y"}`, "org"},
		{"call release call id", "/v1/calls/c%7Dx/release", `{"org":"acme"}`, "call_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, got, _ := b.do(t, "POST", tc.path, tc.body)
			if code != 400 || errType(got) != "invalid_request" || errField(got, "field") != tc.field {
				msg := fmt.Sprint(got)
				if len(msg) > 300 {
					msg = msg[:300] + "…"
				}
				t.Fatalf("%s: %d %s, want 400 invalid_request field %q", tc.path, code, msg, tc.field)
			}
		})
	}
	// Nothing was counted for the refused names.
	if n, err := b.slots.LiveCalls(t.Context()); err != nil || n != 0 {
		t.Fatalf("LiveCalls = %d, %v; want 0", n, err)
	}
}

// Past MaxSlotWaiters waiting requests, one more that would wait is
// answered 503 busy at once; one that tries once still goes through.
func TestHTTPSlotWaitersBounded(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{MaxSlotWaiters: 1}, true)
	// Fill acme's campaign "spring" (cap 1), so that waiters wait.
	code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring"}`)
	if code != 200 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	held := got["slot"]
	done := make(chan int, 1)
	go func() {
		for { // a probe below may hold the one place for a moment
			code, _, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring","timeout_ms":20000,"retry_ms":50}`)
			if code != 503 {
				done <- code
				return
			}
		}
	}()
	// Until the waiter above is in, a probe may take the one place itself
	// (and end in 409 after its 100ms); once it is in, probes get 503.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, got, hdr := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring","timeout_ms":100}`)
		if code == 503 {
			if errType(got) != "busy" || hdr.Get("Retry-After") != "1" {
				t.Fatalf("busy answer: %d %v Retry-After %q", code, got, hdr.Get("Retry-After"))
			}
			break
		}
		if code != 409 || time.Now().After(deadline) {
			t.Fatalf("probe: %d %v, want 503 busy once the waiter is in", code, got)
		}
	}
	// A single try is not a waiter.
	if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring"}`); code != 409 {
		t.Fatalf("single try while the waiter waits: %d %v, want 409 no_slot", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots/release", mustJSON(t, map[string]any{"slot": held})); code != 204 {
		t.Fatalf("release: %d %v", code, got)
	}
	if code := <-done; code != 200 {
		t.Fatalf("the waiter got %d after the release, want 200", code)
	}
}

// With per-organisation tokens, acme's token acts for acme only: rival's
// slots and calls are not found for it, whatever ids it sends; an admin
// token acts for any; a bad token is 401 and counted.
func TestHTTPOrgTokens(t *testing.T) {
	t.Parallel()
	tokens := map[string]struct {
		org   string
		admin bool
	}{"tok-acme": {org: "acme"}, "tok-rival": {org: "rival"}, "tok-admin": {admin: true}}
	b := httpSetup(t, httpapi.Options{Authenticate: func(_ context.Context, bearer string) (string, bool, bool, error) {
		if bearer == "tok-db-down" {
			return "", false, false, errors.New("connection refused")
		}
		p, ok := tokens[bearer]
		return p.org, p.admin, ok, nil
	}}, true)
	as := func(tok string) httpBundle { c := b; c.token = tok; return c }
	acme, rival, admin := as("tok-acme"), as("tok-rival"), as("tok-admin")

	code, got, _ := rival.do(t, "POST", "/v1/slots", `{"org":"rival"}`)
	if code != 200 {
		t.Fatalf("rival acquires its own slot: %d %v", code, got)
	}
	rivalSlot := got["slot"]
	if code, got, _ := rival.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": rivalSlot, "call_id": "r-1"})); code != 204 {
		t.Fatalf("rival binds its call: %d %v", code, got)
	}
	for _, try := range []struct{ path, body string }{
		{"/v1/slots", `{"org":"rival"}`},
		{"/v1/slots/bind", mustJSON(t, map[string]any{"slot": rivalSlot, "call_id": "a-1"})},
		{"/v1/slots/release", mustJSON(t, map[string]any{"slot": rivalSlot})},
		{"/v1/calls/r-1/release", `{"org":"rival"}`},
	} {
		if code, got, _ := acme.do(t, "POST", try.path, try.body); code != 404 || errType(got) != "not_found" {
			t.Errorf("acme's token on rival's %s: %d %v, want 404 not_found", try.path, code, got)
		}
	}
	// rival's call is still bound: rival releases it once.
	if code, got, _ := rival.do(t, "POST", "/v1/calls/r-1/release", `{"org":"rival"}`); code != 204 {
		t.Fatalf("rival's release after acme's attempts: %d %v", code, got)
	}
	if code, got, _ := acme.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 200 {
		t.Fatalf("acme acquires its own: %d %v", code, got)
	}
	if code, got, _ := admin.do(t, "POST", "/v1/slots", `{"org":"rival"}`); code != 200 {
		t.Fatalf("admin acquires for rival: %d %v", code, got)
	}
	for _, tok := range []string{"", "tok-nobody"} {
		if code, got, h := as(tok).do(t, "GET", "/v1/status", ""); code != 401 || h.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %v, want 401", tok, code, got)
		}
	}
	// A token that cannot be checked now is neither accepted nor counted.
	if code, got, h := as("tok-db-down").do(t, "GET", "/v1/status", ""); code != 503 || h.Get("Retry-After") != "1" {
		t.Errorf("token store down: %d %v, want 503 with Retry-After", code, got)
	}
	code, got, _ = admin.do(t, "GET", "/v1/status", "")
	if code != 200 || got["auth_failures"] != float64(2) {
		t.Fatalf("status: %d %v, want auth_failures 2", code, got)
	}
}

// After Redis is wiped, releasing a call bound before the wipe is a 204
// no-op, twice as once, and the organisation's counters start empty: a
// new call takes a slot and is counted alone.
func TestHTTPCallReleaseAfterRedisWiped(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	b := httpServe(t, rdb, prefix, httpapi.Options{}, true)
	code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`)
	if code != 200 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": got["slot"], "call_id": "w-1"})); code != 204 {
		t.Fatalf("bind: %d %v", code, got)
	}
	testredis.DeleteKeys(rdb, prefix)
	if keys, err := rdb.Keys(context.Background(), prefix+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys left after the wipe: %v, %v", keys, err)
	}
	for i := range 2 {
		if code, got, _ := b.do(t, "POST", "/v1/calls/w-1/release", `{"org":"acme"}`); code != 204 {
			t.Fatalf("release %d of w-1 after the wipe: %d %v, want 204", i+1, code, got)
		}
	}
	for i := range 3 {
		if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 200 {
			t.Fatalf("acquire %d after the wipe: %d %v, want 200 on the empty counters (limit 3)", i+1, code, got)
		}
	}
	if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 409 {
		t.Fatalf("a fourth acquire after the wipe: %d %v, want 409 (the counters count again)", code, got)
	}
}
