package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// countingSlots is a fixed number of slots keyed by holder, recording the
// most ever held.
type countingSlots struct {
	mu        sync.Mutex
	limit     int
	holders   map[string]bool
	held      int
	maxHeld   int
	refused   int
	refusedBy map[string]int // refusals per holder (recording)
	refusals  int            // concurrency refusals reported
	// refusalInUse are the in-use counts the refusals reported.
	refusalInUse []int
	// extends counts Extend calls for a holder that had a slot; stray
	// counts those for a holder that had none.
	extends, stray int
	// refusal fires after a refusal; values coalesce.
	refusal chan struct{}
}

func (s *countingSlots) AcquireBatch(_ context.Context, _, holder string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders = map[string]bool{}
	}
	if s.holders[holder] {
		return s.held, true
	}
	if s.held >= s.limit {
		s.refused++
		if s.refusedBy == nil {
			s.refusedBy = map[string]int{}
		}
		s.refusedBy[holder]++
		select {
		case s.refusal <- struct{}{}:
		default:
		}
		return s.held, false
	}
	s.holders[holder] = true
	s.held++
	s.maxHeld = max(s.maxHeld, s.held)
	return s.held, true
}

func (s *countingSlots) Release(_ context.Context, _, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders[holder] {
		delete(s.holders, holder)
		s.held--
	}
}

func (s *countingSlots) Extend(_ context.Context, _, holder string, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders[holder] {
		s.extends++
	} else {
		s.stray++
	}
}

func (s *countingSlots) ReportRefusal(_ context.Context, _ string, inUse int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals++
	s.refusalInUse = append(s.refusalInUse, inUse)
}

func (s *countingSlots) setLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = n
}

// Without a vendor slot a recording waits in eligible (no submission, no
// River attempt used); with two slots, never more than two submissions are
// in flight at once.
func TestPipelineWaitsForVendorSlots(t *testing.T) {
	t.Parallel()
	slots := &countingSlots{refusal: make(chan struct{}, 1)}
	e, files := setupWith(t, sttsim.Config{Latency: 50 * time.Millisecond}, jobs.Config{BatchWorkers: 8}, 8,
		jobs.Deps{Slots: slots, SlotWait: 30 * time.Millisecond})
	e.start(t)
	ctx := context.Background()
	e.ingestAll(t, files)
	// Every recording has asked (and so reached eligible), and asked again.
	var refused int
	asked := func() bool {
		slots.mu.Lock()
		defer slots.mu.Unlock()
		refused = slots.refused
		return refused >= 16 && len(slots.refusedBy) == len(files)
	}
	if !testwait.Until(10*time.Second, slots.refusal, asked) {
		t.Fatalf("jobs did not ask for slots: %d refusals", refused)
	}
	counts, _ := e.ledger.CountByState(ctx)
	if counts[ledger.StateEligible] != len(files) || e.sim.Stats().Submissions != 0 {
		t.Fatalf("without slots: states %v, %d submissions; want all eligible, none sent", counts, e.sim.Stats().Submissions)
	}
	var attempts int
	if err := e.pool.QueryRow(ctx, "SELECT coalesce(max(attempt), 0) FROM river_job WHERE kind = 'transcribe'").Scan(&attempts); err != nil || attempts > 1 {
		t.Fatalf("waiting for a slot used River attempts: max attempt %d (%v)", attempts, err)
	}
	slots.setLimit(2)
	counts = e.waitSettled(t, 30*time.Second)
	if counts[ledger.StateValidated] != len(files) {
		t.Fatalf("states %v, want all validated", counts)
	}
	if slots.maxHeld > 2 || slots.held != 0 {
		t.Fatalf("slots held at most %d (limit 2), %d still held", slots.maxHeld, slots.held)
	}
}
