package rediskit_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/clock"
)

func TestRedisLogOncePerInterval(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := clock.NewStub(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := rediskit.NewRedisLog(logger, time.Minute, c)
	ctx := context.Background()

	for i := range 500 { // an outage: a failed dial after another
		l.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %s", i, "dial tcp 127.0.0.1:1: connect: connection refused")
	}
	c.Advance(59 * time.Second)
	l.Printf(ctx, "still down")
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines within a minute, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "failed to dial after 0 attempts") {
		t.Errorf("first line: %s", buf.String())
	}
	c.Advance(time.Second)
	l.Printf(ctx, "down \x1b[2J again")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines after a minute, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[1], "suppressed_since_last=500") || !strings.Contains(lines[1], "messages_total=502") {
		t.Errorf("second line does not count the held-back messages: %s", lines[1])
	}
	if strings.ContainsRune(buf.String(), 0x1b) {
		t.Errorf("a control character reached the log: %q", lines[1])
	}
	if l.Total() != 502 {
		t.Errorf("Total = %d, want 502", l.Total())
	}
}
