package retryafter

import (
	"sync"
	"time"
)

// testNow is the fixed instant most tests run at: Sun, 01 Mar 2026 12:00:00 GMT.
var testNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

// stubRand returns pick(n) and records every n it was asked for.
type stubRand struct {
	mu    sync.Mutex
	pick  func(n int64) int64
	calls []int64
}

func (r *stubRand) Int64N(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, n)
	return r.pick(n)
}

func lowestRand() *stubRand  { return &stubRand{pick: func(int64) int64 { return 0 }} }
func highestRand() *stubRand { return &stubRand{pick: func(n int64) int64 { return n - 1 }} }
func middleRand() *stubRand  { return &stubRand{pick: func(n int64) int64 { return n / 2 }} }
