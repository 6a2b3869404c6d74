package httpapi_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/internal/testredis"
)

// scriptCounter counts the Lua scripts a Redis client runs.
type scriptCounter struct{ n atomic.Int64 }

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// POST /v1/slots accepts a wait of up to two minutes and no more; the
// field is named.
func TestSlotWaitBounds(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)
	if httpapi.SlotWaitMax.Milliseconds() != 120000 {
		t.Fatalf("SlotWaitMax = %s, want 2m", httpapi.SlotWaitMax)
	}
	code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","timeout_ms":121000}`)
	if code != 400 || errType(got) != "invalid_request" || got["error"].(map[string]any)["field"] != "timeout_ms" ||
		!strings.Contains(got["error"].(map[string]any)["message"].(string), "0–120000") {
		t.Fatalf("121 s: %d %v, want 400 naming timeout_ms and its bound", code, got)
	}
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme","retry_ms":120001}`)
	if code != 400 || got["error"].(map[string]any)["field"] != "retry_ms" {
		t.Fatalf("retry over the bound: %d %v, want 400 naming retry_ms", code, got)
	}
	// 120 s is accepted: the organisation has room, so it answers at once.
	code, got, _ = b.do(t, "POST", "/v1/slots", `{"org":"acme","timeout_ms":120000}`)
	if code != 200 || got["slot"] == nil {
		t.Fatalf("120 s: %d %v, want 200 with a slot", code, got)
	}
}

// Without retry_ms a waiting request asks Redis once a second; with
// retry_ms it asks as often as told. Counted in scripts run, with bounds
// a loaded machine cannot break (it only ever asks less often).
func TestSlotWaitDefaultRetry(t *testing.T) {
	t.Parallel()
	count := func(t *testing.T, retry string) int64 {
		rdb := testredis.Client(t)
		prefix := testredis.Prefix(t, rdb, "httpapi")
		sc := &scriptCounter{}
		rdb.AddHook(sc)
		b := httpServe(t, rdb, prefix, httpapi.Options{}, true)
		// Campaign spring has room for one call: take it.
		if code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring"}`); code != 200 {
			t.Fatalf("first slot: %d %v", code, got)
		}
		before := sc.n.Load()
		code, got, _ := b.do(t, "POST", "/v1/slots", `{"org":"acme","campaign":"spring","timeout_ms":2500`+retry+`}`)
		if code != 409 || errType(got) != "no_slot" {
			t.Fatalf("waiting on a full campaign: %d %v, want 409 no_slot", code, got)
		}
		return sc.n.Load() - before
	}
	t.Run("omitted", func(t *testing.T) {
		t.Parallel()
		// Asks at 0, 1 s, 2 s and once more at the deadline: 250 ms would be 11.
		if n := count(t, ""); n < 2 || n > 5 {
			t.Fatalf("scripts run while waiting 2.5 s with the default retry = %d, want 2–5 (every 1 s)", n)
		}
	})
	t.Run("explicit", func(t *testing.T) {
		t.Parallel()
		if n := count(t, `,"retry_ms":100`); n < 6 {
			t.Fatalf("scripts run while waiting 2.5 s with retry_ms 100 = %d, want at least 6", n)
		}
	})
}
