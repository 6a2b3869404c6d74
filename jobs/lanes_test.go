package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// firstAt is when recording id first entered state, or the zero time.
func firstAt(t *testing.T, l *ledger.Ledger, id uuid.UUID, state ledger.State) time.Time {
	t.Helper()
	for _, ev := range events(t, l, id) {
		if ev.New == state {
			return ev.At
		}
	}
	return time.Time{}
}

// A backlog of 500 batch recordings is being worked through one throttled
// scope (the vendor takes 2 in flight, refuses the rest with 429, and now
// and then announces a short cooldown) when 5 immediate recordings
// arrive: they go ahead of the whole line, and each is validated (the
// pipeline has no Commit here, so validated is where it ends) before the
// last batch recording is first submitted. The batch recordings are given
// a deadline earlier than the immediate ones', so it is the lane, not the
// deadline, that puts the immediate recordings first.
func TestImmediateLaneGoesBeforeBatchBacklog(t *testing.T) {
	t.Parallel()
	const batch, immediate, seed = 500, 5, 11
	rdb := testredis.Client(t)
	w, err := capacity.NewWindows(capRedis(t, rdb, testredis.Prefix(t, rdb, "lanes")), capacity.WindowConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sim := sttsim.Config{MaxInFlight: 2, InFlightRetryAfter: 200 * time.Millisecond, RateLimitShare: 0.01, Cooldown: 300 * time.Millisecond,
		Latency: 20 * time.Millisecond, LatencyJitter: 20 * time.Millisecond, Rand: rand.New(rand.NewPCG(seed, seed+1))}
	e, files := setupWith(t, sim, jobs.Config{BatchWorkers: 20, ImmediateWorkers: 5}, batch+immediate, jobs.Deps{Window: w})
	ctx := context.Background()
	batchDeadline := time.Now().Add(10 * time.Minute) // before the immediate lane's 15m default
	var batchIDs, immediateIDs []uuid.UUID
	for i, f := range files[:batch] {
		res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("batch-%03d", i), Audio: f,
			Lane: ledger.LaneBatch, Deadline: batchDeadline})
		if err != nil {
			t.Fatal(err)
		}
		batchIDs = append(batchIDs, res.Recording.ID)
	}
	e.start(t)
	// The backlog is flowing: the window is in use and the line is long.
	var counts map[ledger.State]int
	flowing := func() bool {
		if counts, err = e.ledger.CountByState(ctx); err != nil {
			t.Fatal(err)
		}
		return counts[ledger.StateValidated] >= 20
	}
	if !testwait.Until(30*time.Second, e.changes, flowing) {
		t.Fatalf("the batch backlog is not moving: %v", counts)
	}
	arrived := time.Now()
	for i, f := range files[batch:] {
		res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("immediate-%d", i), Audio: f,
			Lane: ledger.LaneImmediate})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recording.Deadline.Before(batchDeadline) {
			t.Fatalf("immediate deadline %s is before the batch deadline %s: the test would not tell the lane from the deadline",
				res.Recording.Deadline, batchDeadline)
		}
		immediateIDs = append(immediateIDs, res.Recording.ID)
	}
	counts = e.waitSettled(t, 2*time.Minute)
	if counts[ledger.StateValidated] != batch+immediate {
		t.Fatalf("states %v, want all %d validated", counts, batch+immediate)
	}

	var lastBatch time.Time
	var lastBatchID uuid.UUID
	submittedAfter := 0 // batch recordings first submitted after the immediate ones arrived
	for _, id := range batchIDs {
		at := firstAt(t, e.ledger, id, ledger.StateSubmitted)
		if at.After(lastBatch) {
			lastBatch, lastBatchID = at, id
		}
		if at.After(arrived) {
			submittedAfter++
		}
	}
	if submittedAfter < batch/2 {
		t.Fatalf("only %d batch recordings were still waiting when the immediate ones arrived: the test proves little", submittedAfter)
	}
	var lastImmediate time.Time
	for i, id := range immediateIDs {
		at := firstAt(t, e.ledger, id, ledger.StateValidated)
		if !at.Before(lastBatch) {
			t.Errorf("immediate-%d validated at +%s, not before the last batch recording (%s) was first submitted at +%s",
				i, at.Sub(arrived), lastBatchID, lastBatch.Sub(arrived))
		}
		if at.After(lastImmediate) {
			lastImmediate = at
		}
	}
	// How many batch recordings went out while the immediate ones were
	// being served: those already called to a slot when they arrived.
	overtaken := 0
	for _, id := range batchIDs {
		if at := firstAt(t, e.ledger, id, ledger.StateSubmitted); at.After(arrived) && at.Before(lastImmediate) {
			overtaken++
		}
	}
	// Those already woken for a slot when the immediate ones arrived may
	// go out meanwhile; the line behind them may not. Out of ~480 waiting,
	// a tenth is a generous bound for a busy machine.
	if overtaken > batch/10 {
		t.Errorf("%d batch recordings were first submitted after the immediate ones arrived and before they were all validated; want at most %d",
			overtaken, batch/10)
	}
	st := e.sim.Stats()
	t.Logf("immediate recordings all validated %s after arriving; %d batch recordings first submitted meanwhile, %d after; "+
		"the last batch submission came %s after they arrived; vendor: %d submissions, %d over-limit 429s, %d cooldowns",
		lastImmediate.Sub(arrived).Round(time.Millisecond), overtaken, submittedAfter-overtaken,
		lastBatch.Sub(arrived).Round(time.Millisecond), st.Submissions, st.OverLimit, len(st.Cooldowns))
}

// asyncRun runs n recordings that the vendor always accepts with 202 and
// processes for 300ms, through a vendor slot pool of 2; it returns the
// vendor's stats and the slots once every recording is settled.
func asyncRun(t *testing.T, maxInFlight, n int) (sttsim.Stats, *countingSlots) {
	t.Helper()
	slots := &countingSlots{limit: 2}
	e, files := setupWith(t, sttsim.Config{AsyncShare: 1, ProcessingTime: 300 * time.Millisecond, MaxInFlight: maxInFlight,
		Latency: 10 * time.Millisecond}, jobs.Config{BatchWorkers: 6}, n, jobs.Deps{Slots: slots, SlotWait: 30 * time.Millisecond})
	e.start(t)
	e.ingestAll(t, files)
	counts := e.waitSettled(t, 60*time.Second)
	if counts[ledger.StateValidated] != n {
		t.Fatalf("states %v, want all %d validated", counts, n)
	}
	st := e.sim.Stats()
	if st.Accepted != n || st.Polls < n {
		t.Fatalf("vendor accepted %d and was polled %d times: want every one of %d accepted asynchronously and polled", st.Accepted, st.Polls, n)
	}
	return st, slots
}

// Work the vendor accepted with 202 keeps its vendor slot while it is
// processed, until the poll brings its result: with 2 slots the vendor
// never has more than 2 transcriptions in flight (it counts accepted work
// until it is ready), every slot is given back at the end, and a vendor
// that takes 2 in flight never has to refuse one.
func TestAsyncWorkKeepsItsVendorSlot(t *testing.T) {
	t.Parallel()
	const n = 8
	check := func(t *testing.T, slots *countingSlots) {
		t.Helper()
		slots.mu.Lock()
		defer slots.mu.Unlock()
		if slots.maxHeld > 2 || slots.held != 0 {
			t.Errorf("slots held at most %d (limit 2), %d still held at the end", slots.maxHeld, slots.held)
		}
		if slots.extends == 0 || slots.stray != 0 {
			t.Errorf("%d extensions of held slots, %d of slots not held: want accepted work to extend the slot it holds",
				slots.extends, slots.stray)
		}
	}
	t.Run("unlimited vendor", func(t *testing.T) {
		t.Parallel()
		st, slots := asyncRun(t, 0, n)
		check(t, slots)
		for scope, peak := range st.MaxInFlightSeen {
			if peak > 2 {
				t.Errorf("scope %s had %d transcriptions in flight at once (accepted ones count until ready); want at most the 2 slots", scope, peak)
			}
		}
		if len(st.MaxInFlightSeen) == 0 {
			t.Fatal("the vendor saw nothing in flight")
		}
	})
	t.Run("vendor limit 2", func(t *testing.T) {
		t.Parallel()
		st, slots := asyncRun(t, 2, n)
		check(t, slots)
		if st.OverLimit != 0 || st.RateLimited != 0 {
			t.Errorf("the vendor refused %d submissions over its limit of 2 (%d 429s in all); want none", st.OverLimit, st.RateLimited)
		}
	})
}

// A vendor whose real concurrency (1) is below the slots capacity believes
// in (3) refuses with "too many concurrent requests": each such refusal
// is reported to capacity (Slots.ReportRefusal), and every recording still
// ends validated.
func TestConcurrencyRefusalReportsToCapacity(t *testing.T) {
	t.Parallel()
	const n = 10
	slots := &countingSlots{limit: 3}
	e, files := setupWith(t, sttsim.Config{MaxInFlight: 1, InFlightRetryAfter: 100 * time.Millisecond, Latency: 30 * time.Millisecond},
		jobs.Config{BatchWorkers: 6}, n, jobs.Deps{Slots: slots, SlotWait: 30 * time.Millisecond})
	// All queued before the workers start, so that they submit at once.
	e.ingestAll(t, files)
	e.start(t)
	counts := e.waitSettled(t, 60*time.Second)
	if counts[ledger.StateValidated] != n {
		t.Fatalf("states %v, want all %d validated", counts, n)
	}
	st := e.sim.Stats()
	if st.OverLimit == 0 {
		t.Fatal("the vendor never refused for concurrency: the test proves nothing")
	}
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if slots.refusals == 0 || slots.refusals != st.OverLimit {
		t.Errorf("%d concurrency refusals reported to capacity, want one for each of the vendor's %d", slots.refusals, st.OverLimit)
	}
	for _, inUse := range slots.refusalInUse {
		if inUse < 1 || inUse > 3 {
			t.Errorf("a refusal reported %d slots in use, want 1..3", inUse)
		}
	}
	if slots.held != 0 {
		t.Errorf("%d slots still held at the end", slots.held)
	}
}

// A transcribe job's unique key is its recording and queue only: a job
// with TenantID (the one-statement read) and one inserted before it
// existed are the same job.
func TestTranscribeArgsTenantIsNotPartOfTheUniqueKey(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, sttsim.Config{}, jobs.Config{}, 0)
	ctx := context.Background()
	id := uuid.New()
	first, err := e.client.Insert(ctx, jobs.TranscribeArgs{RecordingID: id, Queue: jobs.QueueBatch}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.client.Insert(ctx, jobs.TranscribeArgs{RecordingID: id, Queue: jobs.QueueBatch, TenantID: "t1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.UniqueSkippedAsDuplicate || second.Job.ID != first.Job.ID {
		t.Fatalf("the job with a tenant was inserted beside the one without (%d, %d)", first.Job.ID, second.Job.ID)
	}
}
