package live_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		{"max", live.RateLimiterConfig{PerSecond: 20, Orgs: map[string]int{"acme": 1}}, ""},
		{"above max", live.RateLimiterConfig{PerSecond: 21}, "RateLimiterConfig.PerSecond must be 1–20, got 21"},
		{"negative", live.RateLimiterConfig{PerSecond: -1}, "RateLimiterConfig.PerSecond"},
		{"org zero", live.RateLimiterConfig{Orgs: map[string]int{"acme": 0}}, `RateLimiterConfig.Orgs["acme"] must be 1–20, got 0`},
		{"org above max", live.RateLimiterConfig{Orgs: map[string]int{"acme": 30}}, `RateLimiterConfig.Orgs["acme"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := live.NewRateLimiter(rdb, tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NewRateLimiter: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NewRateLimiter error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	r, _ := live.NewRateLimiter(rdb, live.RateLimiterConfig{Orgs: map[string]int{"acme": 7}})
	if r.Limit("acme") != 7 || r.Limit("other") != live.StartRateDefault {
		t.Fatalf("Limit = %d, %d; want 7, %d", r.Limit("acme"), r.Limit("other"), live.StartRateDefault)
	}
}

func TestRateLimiterWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "live")
	r, err := live.NewRateLimiter(rdb, live.RateLimiterConfig{KeyPrefix: prefix, Orgs: map[string]int{"acme": 3}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i := range 3 {
		if err := r.Wait(ctx, "acme", 0); err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
	}
	// Another organisation has its own window.
	if err := r.Wait(ctx, "other", 0); err != nil {
		t.Fatalf("other org: %v", err)
	}
	// The 4th start within the second: a short timeout is refused at once.
	start := time.Now()
	err = r.Wait(ctx, "acme", 50*time.Millisecond)
	var rl *live.RateLimitedError
	if !errors.As(err, &rl) || !errors.Is(err, live.ErrRateLimited) || rl.Org != "acme" || rl.Limit != 3 || rl.RetryAfter <= 0 {
		t.Fatalf("Wait with short timeout = %v, want a *RateLimitedError", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Wait took %s to refuse a start it could not make in time", d)
	}
	// A cancelled context ends the wait.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := r.Wait(cctx, "acme", 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with ended ctx = %v, want DeadlineExceeded", err)
	}
	// With room to wait, it waits until the first start leaves the window, then succeeds.
	if err := r.Wait(ctx, "acme", 3*time.Second); err != nil {
		t.Fatalf("Wait with timeout: %v", err)
	}
	if d := time.Since(t0); d < 950*time.Millisecond {
		t.Fatalf("4th start went ahead %s after the 1st, within the one-second window", d)
	}
	if n := rdb.ZCard(ctx, prefix+":{acme}:starts").Val(); n < 1 || n > 3 {
		t.Fatalf("start window holds %d, want 1–3", n)
	}
}
