package outbox

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{24 * time.Hour, "24h"},
		{time.Minute, "1m"},
		{90 * time.Minute, "1h30m"},
		{90 * time.Second, "1m30s"},
		{45 * time.Second, "45s"},
		{time.Hour + time.Second, "1h0m1s"},
		{1500 * time.Millisecond, "1.5s"},
	} {
		if got := shortDuration(tt.d); got != tt.want {
			t.Errorf("shortDuration(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// A snooze never carries a job past its row's deadline: it wakes just
// after it, to end the row on time.
func TestUntilDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	r := Row{Deadline: now.Add(time.Minute)}
	for _, tt := range []struct {
		name string
		now  time.Time
		d    time.Duration
		want time.Duration
	}{
		{"well before", now, 20 * time.Second, 20 * time.Second},
		{"exactly to it", now, time.Minute, time.Minute},
		{"past it", now, time.Hour, time.Minute + 10*time.Millisecond},
		{"deadline passed", now.Add(2 * time.Minute), time.Second, 10 * time.Millisecond},
		{"negative", now, -time.Second, 0},
	} {
		if got := untilDeadline(r, tt.now, tt.d); got != tt.want {
			t.Errorf("%s: untilDeadline(%s) = %s, want %s", tt.name, tt.d, got, tt.want)
		}
	}
}

// TestSweepTimeout: the sweep is bounded by its own Timeout, not by
// River's JobTimeout (a delivery's).
func TestSweepTimeout(t *testing.T) {
	if got := (&sweepWorker{}).Timeout(nil); got != SweepTimeout || got <= 0 {
		t.Fatalf("the sweep's Timeout is %s, want %s", got, SweepTimeout)
	}
}
