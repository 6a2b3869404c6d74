package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger"
)

func TestTransitionHappyPathAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.ingest(t)
	r = b.walk(t, r, ledger.StateEligible, ledger.StateSubmitted)
	if r.Attempt != 1 {
		t.Fatalf("attempt after first submission = %d, want 1", r.Attempt)
	}
	header := "120"
	r, err := b.ledger.Transition(ctx, ledger.Transition{
		RecordingID: r.ID, From: ledger.StateSubmitted, To: ledger.StateRetryWait,
		Reason: "vendor throttled", ResponseClass: "rate_limited", RetryAfter: &header,
		Detail: map[string]any{"status": 429},
	})
	if err != nil {
		t.Fatal(err)
	}
	r = b.walk(t, r, ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated, ledger.StateCommitted)
	if r.Attempt != 2 || r.State != ledger.StateCommitted || r.EventSeq != 9 {
		t.Fatalf("final row = %+v, want committed, attempt 2, seq 9", r)
	}

	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	throttled := evs[3]
	if throttled.Prior != ledger.StateSubmitted || throttled.New != ledger.StateRetryWait ||
		throttled.ResponseClass != "rate_limited" || throttled.RetryAfter == nil || *throttled.RetryAfter != "120" ||
		throttled.Attempt != 1 || throttled.Detail["status"] != float64(429) {
		t.Fatalf("throttle event = %+v", throttled)
	}
	if evs[4].RetryAfter != nil {
		t.Fatalf("event without a header has RetryAfter %q", *evs[4].RetryAfter)
	}
	snap, err := ledger.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if snap != r.Snapshot() {
		t.Fatalf("replay = %+v, row = %+v", snap, r.Snapshot())
	}
}

func TestTransitionErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.ingest(t)

	_, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: ledger.StateReceived, To: ledger.StateSubmitted})
	var ite *ledger.IllegalTransitionError
	if !errors.As(err, &ite) || ite.ByDatabase || ite.From != ledger.StateReceived || ite.To != ledger.StateSubmitted {
		t.Fatalf("skipping a state: err = %v, want IllegalTransitionError from Go", err)
	}

	// A stale reader: the row is in received, the caller thinks eligible.
	_, err = b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: ledger.StateEligible, To: ledger.StateSubmitted})
	var sce *ledger.StateConflictError
	if !errors.As(err, &sce) || sce.Actual != ledger.StateReceived || sce.Expected != ledger.StateEligible || !errors.Is(err, ledger.ErrStateConflict) {
		t.Fatalf("stale from-state: err = %v, want StateConflictError actual=received", err)
	}

	_, err = b.ledger.Transition(ctx, ledger.Transition{RecordingID: uuid.New(), From: ledger.StateReceived, To: ledger.StateEligible})
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unknown recording: err = %v, want ErrNotFound", err)
	}

	got, err := b.ledger.Recording(ctx, r.ID)
	if err != nil || got.EventSeq != 1 || got.State != ledger.StateReceived {
		t.Fatalf("refused transitions changed the row: %+v, %v", got, err)
	}
}

// TransitionTx joins the caller's transaction: rolled back, nothing happened.
func TestTransitionTxRollsBackWithCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.ingest(t)
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := b.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: r.ID, From: ledger.StateReceived, To: ledger.StateEligible}); err != nil {
			return err
		}
		return errors.New("caller changes its mind")
	})
	if err == nil {
		t.Fatal("want the caller's error")
	}
	got, _ := b.ledger.Recording(ctx, r.ID)
	evs, _ := b.ledger.Events(ctx, r.ID)
	if got.State != ledger.StateReceived || len(evs) != 1 {
		t.Fatalf("after rollback: state %s, %d events; want received, 1", got.State, len(evs))
	}

	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: r.ID, From: ledger.StateReceived, To: ledger.StateEligible})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, _ = b.ledger.Recording(ctx, r.ID)
	if got.State != ledger.StateEligible {
		t.Fatalf("after commit: state %s", got.State)
	}
}

// Many workers race the same transition: one wins, the rest get the typed
// error, and one event is written.
func TestTransitionRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for round := range 5 {
		r := b.walk(t, b.ingest(t), ledger.StateEligible)
		const workers = 24
		errs := make([]error, workers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range workers {
			wg.Go(func() {
				<-start
				_, errs[i] = b.ledger.Transition(ctx, ledger.Transition{
					RecordingID: r.ID, From: ledger.StateEligible, To: ledger.StateSubmitted, Reason: "race",
				})
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for i, err := range errs {
			var sce *ledger.StateConflictError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &sce) && sce.Actual == ledger.StateSubmitted:
			default:
				t.Fatalf("round %d worker %d: %v, want nil or StateConflictError", round, i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners, want 1", round, wins)
		}
		var n int
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM recording_events WHERE recording_id = $1 AND new_state = 'submitted'", r.ID).Scan(&n); err != nil || n != 1 {
			t.Fatalf("round %d: %d submitted events (%v), want 1", round, n, err)
		}
		got, _ := b.ledger.Recording(ctx, r.ID)
		if got.Attempt != 1 {
			t.Fatalf("round %d: attempt %d, want 1", round, got.Attempt)
		}
	}
}
