package live_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

func TestRateLimiterConfigValidation(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tc := range []struct {
		name string
		cfg  live.RateLimiterConfig
		want string
	}{
		{"defaults", live.RateLimiterConfig{}, ""},
		{"max", live.RateLimiterConfig{PerSecond: 20, Campaigns: map[string]map[string]int{"acme": {"spring": 1, "": 20}}}, ""},
		{"above max", live.RateLimiterConfig{PerSecond: 21}, "RateLimiterConfig.PerSecond must be 1–20, got 21"},
		{"negative", live.RateLimiterConfig{PerSecond: -1}, "RateLimiterConfig.PerSecond"},
		{"campaign zero", live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"spring": 0}}}, `RateLimiterConfig.Campaigns["acme"]["spring"] must be 1–20, got 0`},
		{"campaign above max", live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"spring": 21}}}, `RateLimiterConfig.Campaigns["acme"]["spring"] must be 1–20, got 21`},
		{"bad campaign id", live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"a b": 2}}}, `RateLimiterConfig.Campaigns["acme"]["a b"]`},
		{"bad org id", live.RateLimiterConfig{Campaigns: map[string]map[string]int{"{acme}": {"spring": 2}}}, `RateLimiterConfig.Campaigns["{acme}"]`},
		{"org rate max", live.RateLimiterConfig{OrgPerSecond: 1000, Orgs: map[string]int{"acme": 1000, "beta": 1}}, ""},
		{"org rate above max", live.RateLimiterConfig{OrgPerSecond: 1001}, "RateLimiterConfig.OrgPerSecond must be 0–1000 (0: no organisation rate), got 1001"},
		{"org rate negative", live.RateLimiterConfig{OrgPerSecond: -1}, "RateLimiterConfig.OrgPerSecond"},
		{"org override zero", live.RateLimiterConfig{Orgs: map[string]int{"acme": 0}}, `RateLimiterConfig.Orgs["acme"] must be 1–1000, got 0`},
		{"org override above max", live.RateLimiterConfig{Orgs: map[string]int{"acme": 1001}}, `RateLimiterConfig.Orgs["acme"] must be 1–1000, got 1001`},
		{"org override bad id", live.RateLimiterConfig{Orgs: map[string]int{"a b": 5}}, `RateLimiterConfig.Orgs["a b"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := live.NewRateLimiter(captest.OnRedis(t, rdb, ""), tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NewRateLimiter: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NewRateLimiter error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	r, _ := live.NewRateLimiter(captest.OnRedis(t, rdb, ""), live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"spring": 7}}})
	if r.Limit("acme", "spring") != 7 || r.Limit("acme", "autumn") != 1 || r.Limit("acme", "") != 1 || r.Limit("other", "spring") != 1 {
		t.Fatalf("Limit = %d, %d, %d, %d; want 7, 1, 1, 1", r.Limit("acme", "spring"), r.Limit("acme", "autumn"), r.Limit("acme", ""), r.Limit("other", "spring"))
	}
	if live.StartRateDefault != 1 {
		t.Fatalf("StartRateDefault = %d, want 1", live.StartRateDefault)
	}
	// No organisation rate unless one is configured: each campaign has
	// only its own, as before the organisation rate existed.
	if live.OrgStartRateDefault != 0 || r.OrgLimit("acme") != 0 {
		t.Fatalf("OrgStartRateDefault = %d, OrgLimit = %d; want 0, 0", live.OrgStartRateDefault, r.OrgLimit("acme"))
	}
	r, _ = live.NewRateLimiter(captest.OnRedis(t, rdb, ""), live.RateLimiterConfig{OrgPerSecond: 8, Orgs: map[string]int{"acme": 30}})
	if r.OrgLimit("acme") != 30 || r.OrgLimit("other") != 8 {
		t.Fatalf("OrgLimit = %d, %d; want 30, 8", r.OrgLimit("acme"), r.OrgLimit("other"))
	}
}

func TestRateLimiterWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "live")
	r, err := live.NewRateLimiter(captest.OnRedis(t, rdb, prefix), live.RateLimiterConfig{Campaigns: map[string]map[string]int{"acme": {"spring": 3}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i := range 3 {
		if err := r.Wait(ctx, "acme", "spring", 0); err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
	}
	// Another organisation, another campaign of the same organisation and
	// its calls without a campaign each have their own window (rate 1).
	for _, oc := range [][2]string{{"other", "spring"}, {"acme", "autumn"}, {"acme", ""}} {
		if err := r.Wait(ctx, oc[0], oc[1], 0); err != nil {
			t.Fatalf("%v: %v", oc, err)
		}
		if err := r.Wait(ctx, oc[0], oc[1], 0); !errors.Is(err, live.ErrRateLimited) {
			t.Fatalf("%v second start in a second = %v, want rate limited (default 1/s)", oc, err)
		}
	}
	// The 4th start within the second: a short timeout is refused at once.
	start := time.Now()
	err = r.Wait(ctx, "acme", "spring", 50*time.Millisecond)
	var rl *live.RateLimitedError
	if !errors.As(err, &rl) || !errors.Is(err, live.ErrRateLimited) || rl.Org != "acme" || rl.Campaign != "spring" || rl.Limit != 3 || rl.RetryAfter <= 0 {
		t.Fatalf("Wait with short timeout = %v, want a *RateLimitedError", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Wait took %s to refuse a start it could not make in time", d)
	}
	// A cancelled context ends the wait.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := r.Wait(cctx, "acme", "spring", 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with ended ctx = %v, want DeadlineExceeded", err)
	}
	// With room to wait, it waits until the first start leaves the window, then succeeds.
	if err := r.Wait(ctx, "acme", "spring", 3*time.Second); err != nil {
		t.Fatalf("Wait with timeout: %v", err)
	}
	if d := time.Since(t0); d < 950*time.Millisecond {
		t.Fatalf("4th start went ahead %s after the 1st, within the one-second window", d)
	}
	if n := rdb.ZCard(ctx, prefix+":{acme}:starts:spring").Val(); n < 1 || n > 3 {
		t.Fatalf("start window holds %d, want 1–3", n)
	}
}
