package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// callerIDSetup serves the API with a caller-ID pool in rdb under prefix,
// acme's pool holding numbers.
func callerIDSetup(t *testing.T, rdb redis.UniversalClient, prefix string, opts httpapi.Options, numbers ...string) httpBundle {
	t.Helper()
	c, err := capacity.NewCallerIDs(captest.OnRedis(t, rdb, prefix), capacity.CallerIDsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(numbers) > 0 {
		if _, err := c.Add(context.Background(), "acme", numbers...); err != nil {
			t.Fatal(err)
		}
	}
	opts.CallerIDs = c
	return httpServe(t, rdb, prefix, opts, true)
}

func TestHTTPCallerIDs(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	b := callerIDSetup(t, rdb, prefix, httpapi.Options{}, "+14155550101", "+14155550102")

	code, first, _ := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-1"}`)
	if code != 200 || first["number"] != "+14155550101" || first["org"] != "acme" || first["call_id"] != "c-1" || first["token"] == "" || first["busy_since"] == nil {
		t.Fatalf("acquire: %d %v", code, first)
	}
	code, second, _ := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-2"}`)
	if code != 200 || second["number"] != "+14155550102" {
		t.Fatalf("second acquire: %d %v", code, second)
	}
	code, got, _ := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-3"}`)
	if code != 409 || errType(got) != "no_caller_id" || errField(got, "busy") != float64(2) || errField(got, "total") != float64(2) {
		t.Fatalf("acquire with none free: %d %v, want 409 no_caller_id 2/2", code, got)
	}
	code, got, _ = b.do(t, "GET", "/v1/caller-ids?org=acme", "")
	if code != 200 || got["busy"] != float64(2) || got["free"] != float64(0) {
		t.Fatalf("list: %d %v", code, got)
	}
	nums := got["numbers"].([]any)
	if n0 := nums[0].(map[string]any); n0["number"] != "+14155550101" || n0["state"] != "busy" || n0["call_id"] != "c-1" || n0["busy_since"] == nil {
		t.Fatalf("list numbers: %v", nums)
	}
	// The other holder's token frees nothing; the right one frees, and again is a no-op.
	wrong := mustJSON(t, map[string]any{"org": "acme", "number": first["number"], "token": second["token"]})
	if code, got, _ := b.do(t, "POST", "/v1/caller-ids:release", wrong); code != 204 {
		t.Fatalf("release with a wrong token: %d %v", code, got)
	}
	if _, got, _ := b.do(t, "GET", "/v1/caller-ids?org=acme", ""); got["busy"] != float64(2) {
		t.Fatalf("a wrong token freed a number: %v", got)
	}
	right := mustJSON(t, map[string]any{"org": "acme", "number": first["number"], "token": first["token"]})
	for range 2 {
		if code, got, _ := b.do(t, "POST", "/v1/caller-ids:release", right); code != 204 {
			t.Fatalf("release: %d %v", code, got)
		}
	}
	if _, got, _ := b.do(t, "GET", "/v1/caller-ids?org=acme", ""); got["busy"] != float64(1) || got["free"] != float64(1) {
		t.Fatalf("after release: %v", got)
	}
	if code, got, _ := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-3"}`); code != 200 || got["number"] != "+14155550101" {
		t.Fatalf("acquire after release: %d %v", code, got)
	}
	// An organisation with no pool: 409, saying it is empty.
	code, got, _ = b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"empty","call_id":"c-1"}`)
	if code != 409 || errType(got) != "no_caller_id" || !strings.Contains(errField(got, "message").(string), "empty") {
		t.Fatalf("acquire from an empty pool: %d %v", code, got)
	}
	if code, got, _ := b.do(t, "GET", "/v1/caller-ids:acquire", ""); code != 405 {
		t.Fatalf("GET on acquire: %d %v, want 405", code, got)
	}
}

func TestHTTPCallerIDsValidation(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	b := callerIDSetup(t, rdb, prefix, httpapi.Options{}, "+14155550101")
	for _, tc := range []struct {
		method, path, body string
		field, says        string
	}{
		{"POST", "/v1/caller-ids:acquire", `{"call_id":"c-1"}`, "org", "required"},
		{"POST", "/v1/caller-ids:acquire", `{"org":"acme"}`, "call_id", "required"},
		{"POST", "/v1/caller-ids:acquire", `{"org":"ac:me","call_id":"c-1"}`, "org", "':'"},
		{"POST", "/v1/caller-ids:release", `{"org":"acme","number":"4155550101","token":"t"}`, "number", `"4155550101" must start with '+'`},
		{"POST", "/v1/caller-ids:release", `{"org":"acme","number":"+1415","token":"t"}`, "number", `"+1415" has 4 digits`},
		{"POST", "/v1/caller-ids:release", `{"org":"acme","number":"+1415555010x","token":"t"}`, "number", `'x'`},
		{"POST", "/v1/caller-ids:release", `{"org":"acme","number":"+14155550101"}`, "token", "required"},
		{"POST", "/v1/caller-ids:release", `{"org":"acme","token":"t"}`, "number", "required"},
		{"GET", "/v1/caller-ids", "", "org", "required"},
	} {
		code, got, _ := b.do(t, tc.method, tc.path, tc.body)
		msg, _ := errField(got, "message").(string)
		if code != 400 || errType(got) != "invalid_request" || errField(got, "field") != tc.field || !strings.Contains(msg, tc.says) {
			t.Errorf("%s %s %s: %d %v, want 400 naming %s and saying %s", tc.method, tc.path, tc.body, code, got, tc.field, tc.says)
		}
	}
	if code, got, _ := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c","extra":1}`); code != 400 {
		t.Errorf("unknown field: %d %v, want 400", code, got)
	}
	// Nothing was taken by the refused requests.
	if _, got, _ := b.do(t, "GET", "/v1/caller-ids?org=acme", ""); got["free"] != float64(1) {
		t.Fatalf("after refused requests: %v", got)
	}
}

func TestHTTPCallerIDsOrgTokens(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	tokens := map[string]struct {
		org   string
		admin bool
	}{"tok-acme": {org: "acme"}, "tok-rival": {org: "rival"}, "tok-admin": {admin: true}}
	b := callerIDSetup(t, rdb, prefix, httpapi.Options{Authenticate: func(_ context.Context, bearer string) (string, bool, bool, error) {
		p, ok := tokens[bearer]
		return p.org, p.admin, ok, nil
	}}, "+14155550101")
	as := func(tok string) httpBundle { c := b; c.token = tok; return c }
	acme, rival, admin := as("tok-acme"), as("tok-rival"), as("tok-admin")

	code, held, _ := acme.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-1"}`)
	if code != 200 {
		t.Fatalf("acme acquires its own: %d %v", code, held)
	}
	release := mustJSON(t, map[string]any{"org": "acme", "number": held["number"], "token": held["token"]})
	for _, try := range []struct{ method, path, body string }{
		{"POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"r-1"}`},
		{"POST", "/v1/caller-ids:release", release},
		{"GET", "/v1/caller-ids?org=acme", ""},
	} {
		if code, got, _ := rival.do(t, try.method, try.path, try.body); code != 404 || errType(got) != "not_found" {
			t.Errorf("rival's token on acme's %s: %d %v, want 404 not_found", try.path, code, got)
		}
	}
	code, got, _ := admin.do(t, "GET", "/v1/caller-ids?org=acme", "")
	if code != 200 || got["busy"] != float64(1) {
		t.Fatalf("admin lists acme's pool after rival's attempts: %d %v, want 1 busy", code, got)
	}
	if code, got, _ := acme.do(t, "POST", "/v1/caller-ids:release", release); code != 204 {
		t.Fatalf("acme releases: %d %v", code, got)
	}
	if code, got, _ := rival.do(t, "GET", "/v1/caller-ids?org=rival", ""); code != 200 || len(got["numbers"].([]any)) != 0 {
		t.Fatalf("rival lists its own empty pool: %d %v", code, got)
	}
}

// With Redis down a caller ID cannot be invented: acquire answers 503 with
// Retry-After at once, release 204.
func TestHTTPCallerIDsRedisDown(t *testing.T) {
	t.Parallel()
	rdb := failFastClient(t, "redis://127.0.0.1:1/0")
	b := callerIDSetup(t, rdb, "unreachable", httpapi.Options{})
	code, got, h := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-1"}`)
	if code != 503 || errType(got) != "caller_ids_unavailable" || h.Get("Retry-After") != "1" {
		t.Fatalf("acquire with Redis down: %d %v, want 503 caller_ids_unavailable with Retry-After", code, got)
	}
	body := `{"org":"acme","number":"+14155550101","token":"0123456789abcdef0123456789abcdef"}`
	if code, got, _ := b.do(t, "POST", "/v1/caller-ids:release", body); code != 204 {
		t.Fatalf("release with Redis down: %d %v, want 204", code, got)
	}
	if code, got, h := b.do(t, "GET", "/v1/caller-ids?org=acme", ""); code != 503 || h.Get("Retry-After") != "1" {
		t.Fatalf("list with Redis down: %d %v, want 503", code, got)
	}
}

func TestHTTPCallerIDsDisabled(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)
	if code, got, _ := b.do(t, "POST", "/v1/caller-ids:acquire", `{"org":"acme","call_id":"c-1"}`); code != 501 || errType(got) != "caller_ids_disabled" {
		t.Fatalf("acquire without a pool: %d %v, want 501", code, got)
	}
}
