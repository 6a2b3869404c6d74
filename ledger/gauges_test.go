package ledger_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/callscribe/callscribe/ledger"
)

// OldestEligible reports every lane, 0 where none waits, the age of the
// oldest eligible recording or retry_wait one whose not_before passed, and
// never a negative age; ScopeCounts counts the scopes cooling down and
// paused; BatchCounts the manifests and items by state and the partial
// completions.
func TestGauges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := b.clock.Now()

	oldest, err := b.ledger.OldestEligible(ctx, at)
	if want := map[ledger.Lane]time.Duration{ledger.LaneImmediate: 0, ledger.LaneBatch: 0}; err != nil || !maps.Equal(oldest, want) {
		t.Fatalf("oldest eligible of an empty ledger: %v, %v; want %v", oldest, err, want)
	}
	counts, err := b.ledger.BatchCounts(ctx)
	if err != nil || len(counts.Manifests) != 0 || len(counts.Items) != 0 || counts.PartialCompletions != 0 {
		t.Fatalf("batch counts of an empty ledger: %+v, %v", counts, err)
	}

	// Batch: one in retry_wait due later, then one eligible, then one
	// received.
	waiting := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	later := b.clock.Now().Add(time.Hour)
	if _, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: waiting.ID, From: ledger.StateSubmitted, To: ledger.StateRetryWait,
		Reason: "test", NotBefore: &later}); err != nil {
		t.Fatal(err)
	}
	eligible := b.walk(t, b.ingest(t), ledger.StateEligible)
	b.ingest(t)
	at = eligible.CreatedAt.Add(90 * time.Second)
	oldest, err = b.ledger.OldestEligible(ctx, at)
	if want := map[ledger.Lane]time.Duration{ledger.LaneImmediate: 0, ledger.LaneBatch: 90 * time.Second}; err != nil || !maps.Equal(oldest, want) {
		t.Fatalf("oldest eligible: %v, %v; want %v", oldest, err, want)
	}
	// Before its receipt: 0, not negative.
	if oldest, err = b.ledger.OldestEligible(ctx, eligible.CreatedAt.Add(-time.Minute)); err != nil || oldest[ledger.LaneBatch] != 0 {
		t.Fatalf("oldest eligible before the receipt: %v, %v; want 0", oldest, err)
	}
	// Once the retry_wait one is due, it is the oldest waiting.
	oldest, err = b.ledger.OldestEligible(ctx, later)
	if want := later.Sub(waiting.CreatedAt); err != nil || oldest[ledger.LaneBatch] != want {
		t.Fatalf("oldest eligible with the retry_wait one due: %v, %v; want %v", oldest, err, want)
	}

	// Scopes: one cooling, one whose deadline passed, one paused.
	now := b.clock.Now()
	for scope, nb := range map[string]time.Time{"s-ahead": now.Add(time.Minute), "s-past": now.Add(-time.Minute)} {
		if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: nb, Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ledger.ScopePause(ctx, "s-paused", "quota"); err != nil {
		t.Fatal(err)
	}
	if sc, err := b.ledger.ScopeCounts(ctx, now); err != nil || sc != (ledger.ScopeCounts{Cooling: 1, Paused: 1}) {
		t.Fatalf("scope counts: %+v, %v; want 1 cooling, 1 paused", sc, err)
	}
	if sc, err := b.ledger.ScopeCounts(ctx, now.Add(time.Hour)); err != nil || sc != (ledger.ScopeCounts{Cooling: 0, Paused: 1}) {
		t.Fatalf("scope counts an hour later: %+v, %v; want none cooling, 1 paused", sc, err)
	}

	// Batch lane: a manifest done with an item completed and one sent
	// back (a partial completion), another formed with its item pending.
	b.walk(t, b.ingest(t), ledger.StateEligible)
	m, recs := formManifest(t, b, "g-1", 2, nil)
	if len(recs) != 2 {
		t.Fatalf("manifest of %d recordings, want 2", len(recs))
	}
	for _, mv := range []ledger.ManifestMove{{From: ledger.ManifestFormed, To: ledger.ManifestSubmitted}, {From: ledger.ManifestSubmitted, To: ledger.ManifestAccepted}} {
		mv.ID, mv.Kind = m.ID, "test"
		if _, err := b.ledger.ManifestMoveTx(ctx, b.pool, mv); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ledger.SettleItemTx(ctx, b.pool, m.ID, recs[0].ID, ledger.ItemCompleted, "tr_1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.SettleItemTx(ctx, b.pool, m.ID, recs[1].ID, ledger.ItemResubmit, "", "lost"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.ManifestMoveTx(ctx, b.pool, ledger.ManifestMove{ID: m.ID, From: ledger.ManifestAccepted, To: ledger.ManifestDone, Kind: "done"}); err != nil {
		t.Fatal(err)
	}
	b.walk(t, b.ingest(t), ledger.StateEligible)
	formManifest(t, b, "g-2", 1, nil)
	counts, err = b.ledger.BatchCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[ledger.ManifestState]int64{ledger.ManifestDone: 1, ledger.ManifestFormed: 1}; !maps.Equal(counts.Manifests, want) {
		t.Errorf("manifests by state %v, want %v", counts.Manifests, want)
	}
	if want := map[ledger.ItemState]int64{ledger.ItemCompleted: 1, ledger.ItemResubmit: 1, ledger.ItemPending: 1}; !maps.Equal(counts.Items, want) {
		t.Errorf("items by state %v, want %v", counts.Items, want)
	}
	if counts.PartialCompletions != 1 {
		t.Errorf("partial completions %d, want 1", counts.PartialCompletions)
	}
}

// The lists of lanes and of manifest and item states hold each once.
func TestLanesAndBatchStates(t *testing.T) {
	t.Parallel()
	if got := ledger.Lanes(); len(got) != 2 || got[0] != ledger.LaneImmediate || got[1] != ledger.LaneBatch {
		t.Errorf("Lanes() = %v", got)
	}
	if got := ledger.ManifestStates(); len(got) != 5 || got[0] != ledger.ManifestFormed || got[4] != ledger.ManifestUnbatched {
		t.Errorf("ManifestStates() = %v", got)
	}
	if got := ledger.ItemStates(); len(got) != 5 || got[0] != ledger.ItemPending || got[4] != ledger.ItemDropped {
		t.Errorf("ItemStates() = %v", got)
	}
}
