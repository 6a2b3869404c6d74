package capacity_test

import (
	"bytes"
	"log/slog"
	"sync"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// leaseLogs is a concurrency-safe log sink for assertions.
type leaseLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *leaseLogs) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *leaseLogs) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *leaseLogs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newLeaseClock returns a settable clock at a whole millisecond, for
// Config.Clock and, read by millis, WithTestNow.
func newLeaseClock() *clock.Stub { return clock.NewStub(time.UnixMilli(1_800_000_000_000)) }

// millis reads c in Unix milliseconds, as WithTestNow wants.
func millis(c clock.Clock) func() int64 { return func() int64 { return c.Now().UnixMilli() } }
