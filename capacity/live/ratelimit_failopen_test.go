package live_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// slotsLogs collects log lines; safe for concurrent use.
type slotsLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *slotsLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *slotsLogs) warnings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "level=WARN")
}

// With Redis down, starts go through uncounted, whichever limit refused
// them while it was up, and one warning is logged.
func TestRateLimiterFailOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := testredis.Throwaway(t)
	logs := &slotsLogs{}
	h := captest.NewRedis(t, capacity.RedisConfig{Client: rdb, AdmitOpTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	r, err := live.NewRateLimiter(h, live.RateLimiterConfig{PerSecond: 5, OrgPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, "acme", "spring", 0); err != nil {
		t.Fatal(err)
	}
	// The organisation's rate refuses (its campaign's allows 5).
	var rl *live.RateLimitedError
	if err := r.Wait(ctx, "acme", "spring", 0); !errors.As(err, &rl) || rl.LimitedBy != live.LimitedByOrg {
		t.Fatalf("2nd start with Redis up = %v, want refused by the organisation's rate", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := r.Wait(ctx, "acme", "spring", 0); err != nil {
			t.Fatalf("start %d with Redis down = %v, want nil (fail open)", i, err)
		}
	}
	if r.Uncounted() != 3 || logs.warnings() != 1 {
		t.Fatalf("uncounted %d, warnings %d; want 3, 1:\n%s", r.Uncounted(), logs.warnings(), logs.buf.String())
	}
}
