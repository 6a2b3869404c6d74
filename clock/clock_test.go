package clock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
)

var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// The system clock is time.Now as it is: the monotonic reading is kept (it
// shows in String as "m=") and the zone is not changed.
func TestSystemKeepsTheMonotonicReading(t *testing.T) {
	t.Parallel()
	var c clock.Clock = clock.System{}
	before := time.Now()
	now := c.Now()
	if !strings.Contains(now.String(), " m=") {
		t.Errorf("System.Now() = %s: the monotonic reading is gone", now)
	}
	if now.Location() != time.Local {
		t.Errorf("System.Now() in %v, want time.Local as time.Now", now.Location())
	}
	if now.Before(before) || now.Sub(before) > time.Minute {
		t.Errorf("System.Now() = %v, time.Now() just before = %v", now, before)
	}
}

func TestStub(t *testing.T) {
	t.Parallel()
	s := clock.NewStub(epoch)
	if got := s.Now(); !got.Equal(epoch) || got.Location() != time.UTC {
		t.Errorf("Now = %v, want %v", got, epoch)
	}
	if got := s.Now(); !got.Equal(epoch) {
		t.Errorf("second Now = %v: a stub without a step must not move", got)
	}
	if got := s.Advance(time.Minute); !got.Equal(epoch.Add(time.Minute)) || !s.Now().Equal(got) {
		t.Errorf("Advance(1m) = %v, then Now = %v", got, s.Now())
	}
	s.Set(epoch.Add(-time.Hour))
	if got := s.Now(); !got.Equal(epoch.Add(-time.Hour)) {
		t.Errorf("after Set, Now = %v", got)
	}
	var zero clock.Stub
	if got := zero.Now(); !got.IsZero() {
		t.Errorf("zero Stub reads %v, want the zero time", got)
	}
}

func TestSteppingStub(t *testing.T) {
	t.Parallel()
	s := clock.NewStepping(epoch, time.Millisecond)
	if a, b := s.Now(), s.Now(); !a.Equal(epoch.Add(time.Millisecond)) || !b.Equal(epoch.Add(2*time.Millisecond)) {
		t.Errorf("readings %v, %v; want epoch+1ms, epoch+2ms", a, b)
	}
	if got := s.Advance(time.Second); !got.Equal(epoch.Add(time.Second + 2*time.Millisecond)) {
		t.Errorf("Advance does not step: %v", got)
	}
}

// Readers and writers race without losing a move (run with -race).
func TestStubConcurrentUse(t *testing.T) {
	t.Parallel()
	s := clock.NewStub(epoch)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Advance(time.Millisecond)
				_ = s.Now()
			}
		})
	}
	wg.Wait()
	if got := s.Now(); !got.Equal(epoch.Add(800 * time.Millisecond)) {
		t.Errorf("after 800 advances of 1ms: %v", got)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if !clock.Sleep(context.Background(), 0) || !clock.Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep on a live context did not run its course")
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if clock.Sleep(done, 0) || clock.Sleep(done, time.Hour) {
		t.Error("Sleep on a done context ran its course")
	}
}
