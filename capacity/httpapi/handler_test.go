package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

type httpBundle struct {
	url    string
	leases *capacity.Leases
	slots  *capacity.Slots
	token  string
}

// httpSetup serves NewHTTPHandler over real Redis with provider "vox" (stt
// limit 2, batch reserve 1) and org "acme" (cap 3, campaign "spring" cap 1).
func httpSetup(t *testing.T, opts httpapi.Options, withSlots bool) httpBundle {
	t.Helper()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	return httpServe(t, rdb, prefix, opts, withSlots)
}

func httpServe(t *testing.T, rdb redis.UniversalClient, prefix string, opts httpapi.Options, withSlots bool) httpBundle {
	t.Helper()
	leases, err := capacity.New(captest.OnRedis(t, rdb, prefix), capacity.Config{Limits: map[string]capacity.ProviderLimit{"vox/stt": {Limit: 2, BatchReserve: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var slots *capacity.Slots
	if withSlots {
		slots, err = capacity.NewSlots(captest.OnRedis(t, rdb, prefix), capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 3, Campaigns: map[string]int{"spring": 1}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(httpapi.NewHandler(leases, slots, opts))
	t.Cleanup(srv.Close)
	return httpBundle{url: srv.URL, leases: leases, slots: slots, token: opts.Token}
}

// do sends method path with body (JSON unless it is "") and decodes a JSON
// answer into a map.
func (b httpBundle) do(t *testing.T, method, path, body string) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %q", method, path, raw)
		}
	} else if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%s %s: %d with an empty body", method, path, resp.StatusCode)
	}
	return resp.StatusCode, m, resp.Header
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func errType(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

func errField(m map[string]any, k string) any {
	e, _ := m["error"].(map[string]any)
	return e[k]
}

func TestHTTPLeaseRoundTrip(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)

	code, got, _ := b.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"call-1","lane":"live"}`)
	if code != 200 || got["granted"] != true || got["uncounted"] != false || got["in_use"] != 1.0 || got["limit"] != 2.0 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	lease := got["lease"].(map[string]any)
	if lease["provider"] != "vox" || lease["kind"] != "stt" || lease["holder"] != "call-1" || lease["counted"] != true ||
		!strings.HasPrefix(lease["id"].(string), "call-1#") {
		t.Fatalf("lease: %v", lease)
	}
	exp1, err := time.Parse(time.RFC3339Nano, lease["expires"].(string))
	if err != nil || time.Until(exp1) < time.Minute {
		t.Fatalf("expires %v: %v", lease["expires"], err)
	}
	if held := b.leases.Held(); len(held) != 0 {
		t.Fatalf("the server's process holds the client's lease (a heartbeat would keep it alive): %v", held)
	}

	// Batch takes the one slot outside the reserve, then is refused.
	code, got, _ = b.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"job-1","lane":"batch"}`)
	if code != 200 || got["granted"] != false || got["lease"] != nil || got["in_use"] != 1.0 || got["limit"] != 2.0 {
		t.Fatalf("batch over the reserve: %d %v", code, got)
	}

	code, got, _ = b.do(t, "POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": []any{lease}}))
	refreshed, _ := got["refreshed"].([]any)
	if code != 200 || len(refreshed) != 1 || len(got["lost"].([]any)) != 0 || got["failed"] != false {
		t.Fatalf("refresh: %d %v", code, got)
	}
	if r := refreshed[0].(map[string]any); r["id"] != lease["id"] || r["counted"] != true {
		t.Fatalf("refreshed lease: %v", r)
	}

	code, got, _ = b.do(t, "GET", "/v1/status", "")
	provs := got["providers"].([]any)
	if code != 200 || len(provs) != 1 || provs[0].(map[string]any)["in_use"] != 1.0 || got["live_calls"] != 0.0 {
		t.Fatalf("status: %d %v", code, got)
	}

	release := mustJSON(t, map[string]any{"lease": lease})
	for range 2 { // idempotent
		if code, got, _ = b.do(t, "POST", "/v1/leases/release", release); code != 204 {
			t.Fatalf("release: %d %v", code, got)
		}
	}
	code, got, _ = b.do(t, "POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": []any{lease}}))
	if code != 200 || len(got["lost"].([]any)) != 1 || len(got["refreshed"].([]any)) != 0 {
		t.Fatalf("refresh after release: %d %v", code, got)
	}
	_, got, _ = b.do(t, "GET", "/v1/status", "")
	if n := got["providers"].([]any)[0].(map[string]any)["in_use"]; n != 0.0 {
		t.Fatalf("in use after release: %v", n)
	}

	// A provider without a limit is granted uncounted; its lease round-trips as such.
	code, got, _ = b.do(t, "POST", "/v1/leases", `{"provider":"other","kind":"tts","holder":"call-2","lane":"live"}`)
	if code != 200 || got["granted"] != true || got["uncounted"] != true || got["lease"].(map[string]any)["counted"] != false {
		t.Fatalf("unlimited provider: %d %v", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": []any{got["lease"]}}))
	if code != 200 || len(got["lost"].([]any)) != 0 {
		t.Fatalf("refresh of an uncounted lease: %d %v", code, got)
	}
}

func TestHTTPSlots(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)

	code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring","timeout_ms":0,"retry_ms":0}`)
	if code != 200 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	slot := got["slot"].(map[string]any)
	if slot["org"] != "acme" || slot["campaign"] != "spring" || slot["id"] == "" || slot["uncounted"] != false || slot["expires"] == nil {
		t.Fatalf("slot: %v", slot)
	}

	// The campaign cap is 1: the next acquire waits, then gets 409 with the counts.
	start := time.Now()
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring","timeout_ms":60,"retry_ms":20}`)
	if code != 409 || errType(got) != "no_slot" || errField(got, "campaign_in_use") != 1.0 || errField(got, "campaign_limit") != 1.0 ||
		errField(got, "org_in_use") != 1.0 || errField(got, "org_limit") != 3.0 || errField(got, "org") != "acme" {
		t.Fatalf("full campaign: %d %v", code, got)
	}
	if waited := time.Since(start); waited < 60*time.Millisecond {
		t.Fatalf("no_slot after %s, want the 60ms timeout", waited)
	}

	if code, got, _ = b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": slot, "call_id": "c-1"})); code != 204 {
		t.Fatalf("bind: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": slot, "call_id": "c-1"})); code != 204 {
		t.Fatalf("bind again: %d %v", code, got)
	}
	_, got, _ = b.do(t, "GET", "/v1/status", "")
	if got["live_calls"] != 1.0 {
		t.Fatalf("live calls: %v", got)
	}

	// Another slot (no campaign) cannot take the bound call; it is released.
	_, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme"}`)
	other := got["slot"].(map[string]any)
	code, got, _ = b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": other, "call_id": "c-1"}))
	if code != 409 || errType(got) != "already_bound" || errField(got, "call_id") != "c-1" {
		t.Fatalf("bind a bound call: %d %v", code, got)
	}

	if code, got, _ = b.do(t, "POST", "/v1/calls/c-1/release", `{"org":"acme"}`); code != 204 {
		t.Fatalf("release call: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/c-1/release", `{"org":"acme"}`); code != 204 {
		t.Fatalf("second release of the call: %d %v, want 204 (idempotent, nothing released)", code, got)
	}
	_, got, _ = b.do(t, "GET", "/v1/status", "")
	if got["live_calls"] != 0.0 {
		t.Fatalf("live calls after release: %v", got)
	}

	// The campaign slot is free again; one released unbound frees it too.
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring"}`)
	if code != 200 {
		t.Fatalf("acquire after release: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/slots/release", mustJSON(t, map[string]any{"slot": got["slot"]})); code != 204 {
		t.Fatalf("release slot: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring"}`); code != 200 {
		t.Fatalf("acquire after slot release: %d %v", code, got)
	}
}

// TestHTTPFailOpen: with Redis unreachable, acquires answer 200 granted and
// uncounted and releases 204, never 5xx.
func TestHTTPFailOpen(t *testing.T) {
	t.Parallel()
	rdb := failFastClient(t, "redis://127.0.0.1:1/0")
	b := httpServe(t, rdb, "unreachable", httpapi.Options{}, true)

	code, got, _ := b.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"call-1","lane":"live"}`)
	if code != 200 || got["granted"] != true || got["uncounted"] != true || got["lease"].(map[string]any)["counted"] != false {
		t.Fatalf("acquire: %d %v", code, got)
	}
	lease := got["lease"]
	code, got, _ = b.do(t, "POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": []any{lease}}))
	if code != 200 || len(got["lost"].([]any)) != 0 {
		t.Fatalf("refresh: %d %v", code, got)
	}
	// A counted lease (from before the outage) cannot be refreshed: failed, not lost.
	counted := map[string]any{"id": "call-0#x", "provider": "vox", "kind": "stt", "holder": "call-0", "counted": true}
	code, got, _ = b.do(t, "POST", "/v1/leases/refresh", mustJSON(t, map[string]any{"leases": []any{counted}}))
	if code != 200 || got["failed"] != true || len(got["lost"].([]any)) != 0 {
		t.Fatalf("refresh during outage: %d %v", code, got)
	}
	for _, l := range []any{lease, counted} {
		if code, got, _ = b.do(t, "POST", "/v1/leases/release", mustJSON(t, map[string]any{"lease": l})); code != 204 {
			t.Fatalf("release: %d %v", code, got)
		}
	}

	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring"}`)
	slot, _ := got["slot"].(map[string]any)
	if code != 200 || slot["uncounted"] != true {
		t.Fatalf("slot acquire: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/slots/bind", mustJSON(t, map[string]any{"slot": slot, "call_id": "c"})); code != 204 {
		t.Fatalf("bind: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/calls/c/release", `{"org":"acme"}`); code != 204 {
		t.Fatalf("release call: %d %v", code, got)
	}
	if code, got, _ = b.do(t, "POST", "/v1/slots/release", mustJSON(t, map[string]any{"slot": slot})); code != 204 {
		t.Fatalf("release slot: %d %v", code, got)
	}
	// Status is an operator's read: it says Redis is down.
	if code, got, _ = b.do(t, "GET", "/v1/status", ""); code != 503 || errType(got) != "unavailable" {
		t.Fatalf("status: %d %v", code, got)
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{MaxBodyBytes: 1024}, true)
	big := `{"leases":[` + strings.Repeat(`{"id":"x","provider":"vox","kind":"stt","holder":"h"},`, 40) + `{}]}`
	cases := []struct {
		name, method, path, body string
		code                     int
		typ, field               string
	}{
		{"unknown route", "GET", "/v1/nope", "", 404, "not_found", ""},
		{"root", "GET", "/", "", 404, "not_found", ""},
		{"wrong method", "GET", "/v1/leases", "", 405, "method_not_allowed", ""},
		{"status by POST", "POST", "/v1/status", "{}", 405, "method_not_allowed", ""},
		{"call release by GET", "GET", "/v1/calls/c/release", "", 405, "method_not_allowed", ""},
		{"bad JSON", "POST", "/v1/leases", `{"provider":`, 400, "invalid_request", ""},
		{"empty body", "POST", "/v1/leases", " ", 400, "invalid_request", ""},
		{"two objects", "POST", "/v1/leases", `{} {}`, 400, "invalid_request", ""},
		{"unknown field", "POST", "/v1/slots", `{"org":"acme","timeout":5}`, 400, "invalid_request", ""},
		{"wrong type", "POST", "/v1/slots", `{"org":"acme","timeout_ms":"5"}`, 400, "invalid_request", "timeout_ms"},
		{"no provider", "POST", "/v1/leases", `{"kind":"stt","holder":"h","lane":"live"}`, 400, "invalid_request", "provider"},
		{"bad kind", "POST", "/v1/leases", `{"provider":"vox","kind":"asr","holder":"h","lane":"live"}`, 400, "invalid_request", "kind"},
		{"no holder", "POST", "/v1/leases", `{"provider":"vox","kind":"stt","lane":"live"}`, 400, "invalid_request", "holder"},
		{"no lane", "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"h"}`, 400, "invalid_request", "lane"},
		{"braces", "POST", "/v1/leases", `{"provider":"v{x}","kind":"stt","holder":"h","lane":"live"}`, 400, "invalid_request", "provider"},
		{"refresh without leases", "POST", "/v1/leases/refresh", `{}`, 400, "invalid_request", "leases"},
		{"refresh lease without id", "POST", "/v1/leases/refresh", `{"leases":[{"provider":"vox","kind":"stt"}]}`, 400, "invalid_request", "leases[0].id"},
		{"release without lease", "POST", "/v1/leases/release", `{}`, 400, "invalid_request", "lease"},
		{"release lease without kind", "POST", "/v1/leases/release", `{"lease":{"id":"x","provider":"vox"}}`, 400, "invalid_request", "lease.kind"},
		{"slot without org", "POST", "/v1/slots", `{"campaign":"spring"}`, 400, "invalid_request", "org"},
		{"negative timeout", "POST", "/v1/slots", `{"org":"acme","timeout_ms":-1}`, 400, "invalid_request", "timeout_ms"},
		{"huge timeout", "POST", "/v1/slots", `{"org":"acme","timeout_ms":9223372036854775807}`, 400, "invalid_request", "timeout_ms"},
		{"negative retry", "POST", "/v1/slots", `{"org":"acme","retry_ms":-5}`, 400, "invalid_request", "retry_ms"},
		{"bind without slot", "POST", "/v1/slots/bind", `{"call_id":"c"}`, 400, "invalid_request", "slot"},
		{"bind without call", "POST", "/v1/slots/bind", `{"slot":{"org":"acme","id":"x","expires":"2030-01-01T00:00:00Z"}}`, 400, "invalid_request", "call_id"},
		{"slot release without id", "POST", "/v1/slots/release", `{"slot":{"org":"acme"}}`, 400, "invalid_request", "slot.id"},
		{"body over the limit", "POST", "/v1/leases/refresh", big, 413, "too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, got, _ := b.do(t, c.method, c.path, c.body)
			if code != c.code || errType(got) != c.typ {
				t.Fatalf("%d %v, want %d %s", code, got, c.code, c.typ)
			}
			if msg, _ := errField(got, "message").(string); msg == "" {
				t.Fatalf("no message: %v", got)
			}
			if c.field != "" {
				if f := errField(got, "field"); f != c.field {
					t.Fatalf("field %v, want %s: %v", f, c.field, got)
				}
				if msg := errField(got, "message").(string); !strings.Contains(msg, c.field) {
					t.Fatalf("message %q does not name %s", msg, c.field)
				}
			}
		})
	}

	t.Run("allow header", func(t *testing.T) {
		t.Parallel()
		_, _, hdr := b.do(t, "GET", "/v1/leases/release", "")
		if hdr.Get("Allow") != "POST" {
			t.Fatalf("Allow %q", hdr.Get("Allow"))
		}
	})
	t.Run("content type", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Post(b.url+"/v1/leases", "text/plain", strings.NewReader(`{"provider":"vox","kind":"stt","holder":"h","lane":"live"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("text/plain body: %d", resp.StatusCode)
		}
	})
}

func TestHTTPBodyLimitDefault(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)
	pad := bytes.Repeat([]byte("a"), httpapi.MaxBodyDefault)
	code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"`+string(pad)+`"}`)
	if code != 413 || errType(got) != "too_large" {
		t.Fatalf("64 KiB org: %d %v", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"`+string(pad[:httpapi.MaxBodyDefault-100])+`"}`)
	if code != 400 || errField(got, "field") != "org" { // read whole, then refused as an id
		t.Fatalf("just under the limit: %d", code)
	}
}

func TestHTTPSlotsDisabled(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, false)
	for _, path := range []string{"/v1/slots", "/v1/slots/bind", "/v1/slots/release", "/v1/calls/c/release"} {
		if code, got, _ := b.do(t, "POST", path, `{}`); code != 501 || errType(got) != "slots_disabled" {
			t.Fatalf("%s: %d %v", path, code, got)
		}
	}
	code, got, _ := b.do(t, "GET", "/v1/status", "")
	if _, ok := got["live_calls"]; code != 200 || ok {
		t.Fatalf("status without slots: %d %v", code, got)
	}
}

func TestHTTPToken(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{Token: "s3cret"}, true)
	if code, got, _ := b.do(t, "GET", "/v1/status", ""); code != 200 {
		t.Fatalf("with token: %d %v", code, got)
	}
	for _, tok := range []string{"", "wrong", "s3cret2"} {
		nb := b
		nb.token = tok
		code, got, hdr := nb.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"h","lane":"live"}`)
		if code != 401 || errType(got) != "unauthorized" || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("token %q: %d %v", tok, code, got)
		}
		if code, _, _ := nb.do(t, "GET", "/v1/nope", ""); code != 401 {
			t.Fatalf("unknown route without token: %d", code)
		}
	}
	// The scheme is case-insensitive (RFC 9110 section 11.1); the token is not.
	for _, tt := range []struct {
		header string
		want   int
	}{
		{"bearer s3cret", 200},
		{"BEARER s3cret", 200},
		{"bEaReR  s3cret ", 200},
		{"Bearer S3CRET", 401},
		{"Basic s3cret", 401},
		{"Bearers3cret", 401},
		{"s3cret", 401},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+"/v1/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", tt.header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Authorization %q: status %d, want %d", tt.header, resp.StatusCode, tt.want)
		}
	}
	_, got, _ := b.do(t, "GET", "/v1/status", "")
	if got["providers"].([]any)[0].(map[string]any)["in_use"] != 0.0 {
		t.Fatalf("a refused request took a lease: %v", got)
	}
}
