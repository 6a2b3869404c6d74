package ledger_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/ledger"
)

func TestValidationsAndEventCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	before, err := b.ledger.EventCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := b.ingest(t)
	if n, err := b.ledger.Validations(ctx, r.ID); err != nil || n != 0 {
		t.Fatalf("Validations of a received recording = %d, %v; want 0", n, err)
	}
	r = b.walk(t, r, ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated,
		ledger.StateCommitted, ledger.StateValidated) // re-validated: a second validation
	if n, err := b.ledger.Validations(ctx, r.ID); err != nil || n != 2 {
		t.Fatalf("Validations = %d, %v; want 2", n, err)
	}
	// A note in validated is an event that enters no state: not a validation.
	if _, err := b.ledger.Note(ctx, ledger.Note{RecordingID: r.ID, State: ledger.StateValidated, Reason: "checked"}); err != nil {
		t.Fatal(err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if n, err := b.ledger.ValidationsTx(ctx, tx, r.ID); err != nil || n != 2 {
		t.Fatalf("ValidationsTx after a note = %d, %v; want 2", n, err)
	}
	if n, err := b.ledger.Validations(ctx, uuid.New()); err != nil || n != 0 {
		t.Fatalf("Validations of an unknown recording = %d, %v; want 0", n, err)
	}

	after, err := b.ledger.EventCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != int64(r.EventSeq)+1 {
		t.Fatalf("EventCount grew by %d, want %d (the recording's events)", after-before, r.EventSeq+1)
	}
}
