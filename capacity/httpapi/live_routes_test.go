package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

func startsOn(t *testing.T, rdb redis.UniversalClient, prefix string) *live.RateLimiter {
	t.Helper()
	r, err := live.NewRateLimiter(captest.NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, AdmitOpTimeout: 300 * time.Millisecond}),
		live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"spring": 2}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// POST /v1/calls:start counts starts per (organisation, campaign): spring
// of acme starts 2 a second, every other campaign 1; the next start gets
// 429 rate_limited with Retry-After, or waits when given timeout_ms.
func TestHTTPCallStart(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	b := httpServe(t, rdb, prefix, httpapi.Options{Starts: startsOn(t, rdb, prefix)}, true)
	for i := range 2 {
		code, got, _ := b.do(t, "POST", "/v1/calls:start", `{"org":"acme","campaign":"spring"}`)
		if code != 200 || got["started"] != true || got["uncounted"] != false {
			t.Fatalf("start %d: %d %v", i+1, code, got)
		}
	}
	code, got, hdr := b.do(t, "POST", "/v1/calls:start", `{"org":"acme","campaign":"spring"}`)
	if code != 429 || errType(got) != "rate_limited" || hdr.Get("Retry-After") != "1" {
		t.Fatalf("3rd start in a second: %d %v Retry-After %q, want 429 rate_limited, Retry-After 1", code, got, hdr.Get("Retry-After"))
	}
	if e := got["error"].(map[string]any); e["campaign"] != "spring" || e["limited_by"] != "campaign" || e["limit"] != 2.0 {
		t.Fatalf("rate_limited names %v, want campaign spring, limited by the campaign's limit 2", e)
	}
	// Another campaign of acme and acme's calls without a campaign: rate 1 each.
	for _, body := range []string{`{"org":"acme","campaign":"autumn"}`, `{"org":"acme"}`} {
		if code, got, _ := b.do(t, "POST", "/v1/calls:start", body); code != 200 {
			t.Fatalf("%s first: %d %v", body, code, got)
		}
		if code, got, _ := b.do(t, "POST", "/v1/calls:start", body); code != 429 {
			t.Fatalf("%s second: %d %v, want 429 (default 1 a second)", body, code, got)
		}
	}
	// With time to wait, the start waits for the window to move on.
	code, got, _ = b.do(t, "POST", "/v1/calls:start", `{"org":"acme","campaign":"spring","timeout_ms":10000}`)
	if code != 200 || got["started"] != true {
		t.Fatalf("waiting start: %d %v", code, got)
	}
	if w, _ := got["waited_ms"].(float64); w <= 0 {
		t.Fatalf("waited_ms = %v, want > 0 (it had to wait for the window)", got["waited_ms"])
	}
}

// An organisation's start rate counts its campaigns' starts together:
// acme at 2 a second starts one call in each of two campaigns, and the
// third campaign's start is 429 limited_by org, though that campaign has
// room of its own.
func TestHTTPCallStartOrgRate(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	starts, err := live.NewRateLimiter(captest.NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix}),
		live.RateLimiterConfig{Orgs: map[string]int{"acme": 2}})
	if err != nil {
		t.Fatal(err)
	}
	b := httpServe(t, rdb, prefix, httpapi.Options{Starts: starts}, true)
	for _, camp := range []string{"spring", "autumn"} {
		if code, got, _ := b.do(t, "POST", "/v1/calls:start", `{"org":"acme","campaign":"`+camp+`"}`); code != 200 {
			t.Fatalf("%s: %d %v", camp, code, got)
		}
	}
	code, got, hdr := b.do(t, "POST", "/v1/calls:start", `{"org":"acme","campaign":"winter"}`)
	if code != 429 || errType(got) != "rate_limited" || hdr.Get("Retry-After") != "1" {
		t.Fatalf("3rd campaign's start: %d %v Retry-After %q, want 429 rate_limited, Retry-After 1", code, got, hdr.Get("Retry-After"))
	}
	e := got["error"].(map[string]any)
	if e["org"] != "acme" || e["campaign"] != "winter" || e["limited_by"] != "org" || e["limit"] != 2.0 || !strings.Contains(e["message"].(string), "organisation's start rate") {
		t.Fatalf("rate_limited names %v, want acme's organisation limit 2 for campaign winter", e)
	}
	if ms, _ := e["retry_after_ms"].(float64); ms <= 0 || ms > 1000 {
		t.Fatalf("retry_after_ms = %v, want 1–1000", e["retry_after_ms"])
	}
	// Another organisation has no organisation rate.
	for _, camp := range []string{"spring", "autumn", "winter"} {
		if code, got, _ := b.do(t, "POST", "/v1/calls:start", `{"org":"beta","campaign":"`+camp+`"}`); code != 200 {
			t.Fatalf("beta %s: %d %v", camp, code, got)
		}
	}
}

func TestHTTPCallStartErrors(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	b := httpServe(t, rdb, prefix, httpapi.Options{Starts: startsOn(t, rdb, prefix)}, true)
	for _, c := range []struct{ body, field string }{
		{`{"campaign":"spring"}`, "org"},
		{`{"org":"acme","campaign":"a b"}`, "campaign"},
		{`{"org":"acme","timeout_ms":120001}`, "timeout_ms"},
		{`{"org":"acme","timeout_ms":-1}`, "timeout_ms"},
	} {
		code, got, _ := b.do(t, "POST", "/v1/calls:start", c.body)
		if code != 400 || got["error"].(map[string]any)["field"] != c.field {
			t.Fatalf("%s: %d %v, want 400 naming %s", c.body, code, got, c.field)
		}
	}
	off := httpSetup(t, httpapi.Options{}, true)
	if code, got, _ := off.do(t, "POST", "/v1/calls:start", `{"org":"acme"}`); code != 501 || errType(got) != "starts_disabled" {
		t.Fatalf("without a rate limiter: %d %v, want 501", code, got)
	}
}

// With Redis unreachable, starts go through, flagged uncounted.
func TestHTTPCallStartFailOpen(t *testing.T) {
	t.Parallel()
	rdb := failFastClient(t, "redis://127.0.0.1:1/0")
	b := httpServe(t, rdb, "unreachable", httpapi.Options{Starts: startsOn(t, rdb, "unreachable")}, true)
	for range 3 {
		code, got, _ := b.do(t, "POST", "/v1/calls:start", `{"org":"acme","campaign":"spring","timeout_ms":1000}`)
		if code != 200 || got["started"] != true || got["uncounted"] != true {
			t.Fatalf("start without Redis: %d %v, want 200 started uncounted", code, got)
		}
	}
}
