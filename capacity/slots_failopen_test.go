package capacity_test

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

func TestSlotsFailOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := testredis.Throwaway(t)
	logs := &slotsLogs{}
	r := captest.NewRedis(t, capacity.RedisConfig{Client: rdb, AdmitOpTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	s := newTestSlots(t, r, capacity.SlotsConfig{OrgLimit: 1})

	held, err := s.Acquire(ctx, "acme", "spring", 0, 0)
	if err != nil || held.Uncounted {
		t.Fatalf("Acquire with Redis up = %+v, %v", held, err)
	}
	if err := held.Bind(ctx, "call-1"); err != nil {
		t.Fatal(err)
	}
	// Redis answered "full": that is the one error Acquire returns.
	if _, err := s.Acquire(ctx, "acme", "spring", 0, 0); !errors.Is(err, capacity.ErrNoSlot) {
		t.Fatalf("Acquire while full = %v, want ErrNoSlot", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// Redis gone: slots are granted uncounted, nothing errors, one warning.
	for i := range 3 {
		sl, err := s.Acquire(ctx, "acme", "spring", time.Second, 10*time.Millisecond)
		if err != nil || !sl.Uncounted {
			t.Fatalf("Acquire %d with Redis down = %+v, %v; want an uncounted slot", i, sl, err)
		}
		if err := sl.Bind(ctx, "call-2"); err != nil {
			t.Fatalf("Bind of an uncounted slot: %v", err)
		}
		if err := sl.Release(ctx); err != nil {
			t.Fatalf("Release of an uncounted slot: %v", err)
		}
	}
	if err := s.ReleaseCall(ctx, "acme", "call-1"); err != nil {
		t.Fatalf("ReleaseCall with Redis down: %v", err)
	}
	if _, err := s.LiveCalls(ctx); err == nil {
		t.Fatal("LiveCalls with Redis down returned no error")
	}
	if got := s.Uncounted(); got != 4 { // 3 acquires + 1 release-call
		t.Fatalf("Uncounted = %d, want 4", got)
	}
	if n := logs.warnings(); n != 1 {
		t.Fatalf("%d fail-open warnings logged, want 1 (rate-limited):\n%s", n, logs.buf.String())
	}
}
