package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger"
)

// formManifest forms a manifest of recs in one transaction, taking them
// as candidates the way the batch lane does.
func formManifest(t *testing.T, b *bundle, key string, max int, back *uuid.UUID) (ledger.Manifest, []ledger.Recording) {
	t.Helper()
	ctx := context.Background()
	var m ledger.Manifest
	var recs []ledger.Recording
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		if recs, _, err = b.ledger.BatchCandidatesTx(ctx, tx, []string{"acme"}, max); err != nil {
			return err
		}
		m, err = b.ledger.FormManifestTx(ctx, tx, ledger.NewManifest{Key: key, TenantID: "acme", Provider: "generic-http", Model: "general",
			Scope: "s", Recordings: recs, ResubmissionOf: back, Reason: "full", Detail: map[string]any{"why": "test"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, recs
}

// A manifest takes eligible batch recordings no other manifest holds,
// moves by compare-and-set with an event each time, settles each item
// once, sends its unfinished items back for a later manifest that names
// it, and keeps an append-only history.
func TestManifestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var eligible []ledger.Recording
	for range 5 {
		eligible = append(eligible, b.walk(t, b.ingest(t), ledger.StateEligible))
	}
	b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted) // not a candidate

	m, recs := formManifest(t, b, "m-1", 3, nil)
	if m.State != ledger.ManifestFormed || m.Items != 3 || len(recs) != 3 || recs[0].ID != eligible[0].ID {
		t.Fatalf("formed %+v with %d recordings", m, len(recs))
	}
	// The next former sees only the two left.
	m2, recs2 := formManifest(t, b, "m-2", 10, nil)
	if len(recs2) != 2 || m2.Items != 2 {
		t.Fatalf("second manifest took %d recordings", len(recs2))
	}
	if _, err := b.ledger.ManifestMoveTx(ctx, b.pool, ledger.ManifestMove{ID: m.ID, From: ledger.ManifestFormed, To: ledger.ManifestSubmitted,
		Kind: "submitted", Reason: "sent"}); err != nil {
		t.Fatal(err)
	}
	_, err := b.ledger.ManifestMoveTx(ctx, b.pool, ledger.ManifestMove{ID: m.ID, From: ledger.ManifestFormed, To: ledger.ManifestSubmitted})
	var conflict *ledger.ManifestConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, ledger.ErrStateConflict) || conflict.Actual != ledger.ManifestSubmitted {
		t.Fatalf("a stale move: %v, want a conflict naming submitted", err)
	}
	acc, err := b.ledger.ManifestMoveTx(ctx, b.pool, ledger.ManifestMove{ID: m.ID, From: ledger.ManifestSubmitted, To: ledger.ManifestAccepted,
		VendorBatchID: "b_1", Kind: "accepted"})
	if err != nil || acc.VendorBatchID != "b_1" {
		t.Fatalf("accepted: %+v %v", acc, err)
	}
	if ok, err := b.ledger.SettleItemTx(ctx, b.pool, m.ID, recs[0].ID, ledger.ItemCompleted, "tr_1", ""); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if ok, err := b.ledger.SettleItemTx(ctx, b.pool, m.ID, recs[0].ID, ledger.ItemFailed, "", "again"); ok || err != nil {
		t.Fatalf("an item settles once: %v %v", ok, err)
	}
	b.walk(t, recs[0], ledger.StateSubmitted) // its recording moved on
	for _, r := range recs[1:] {
		if _, err := b.ledger.SettleItemTx(ctx, b.pool, m.ID, r.ID, ledger.ItemResubmit, "", "lost by the vendor"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ledger.ManifestNote(ctx, m.ID, "polled", "2 items to send again", nil); err != nil {
		t.Fatal(err)
	}
	// Sent back by a manifest not yet done: not candidates yet, so that a
	// resubmission carries all of its predecessor's unfinished items.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		early, _, err := b.ledger.BatchCandidatesTx(ctx, tx, []string{"acme"}, 10)
		if err == nil && len(early) != 0 {
			t.Errorf("%d candidates while their manifest is not done, want 0", len(early))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.ManifestMoveTx(ctx, b.pool, ledger.ManifestMove{ID: m.ID, From: ledger.ManifestAccepted, To: ledger.ManifestDone, Kind: "done"}); err != nil {
		t.Fatal(err)
	}
	// The items sent back are candidates again, and say where from.
	var back map[uuid.UUID]uuid.UUID
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		recs, back, err = b.ledger.BatchCandidatesTx(ctx, tx, []string{"acme"}, 10)
		return err
	})
	if err != nil || len(recs) != 2 || back[recs[0].ID] != m.ID || back[recs[1].ID] != m.ID {
		t.Fatalf("candidates after the manifest: %d, from %v (%v)", len(recs), back, err)
	}
	m3, _ := formManifest(t, b, "m-3", 10, &m.ID)
	if m3.ResubmissionOf == nil || *m3.ResubmissionOf != m.ID {
		t.Fatalf("resubmission %+v", m3)
	}

	got, items, err := b.ledger.Manifest(ctx, m.ID)
	if err != nil || got.State != ledger.ManifestDone || len(items) != 3 || items[0].State != ledger.ItemCompleted ||
		items[0].ProviderID != "tr_1" || items[1].State != ledger.ItemResubmit || items[0].BusinessKey != recs0Key(t, b, items[0].RecordingID) {
		t.Fatalf("manifest %+v items %+v (%v)", got, items, err)
	}
	evs, err := b.ledger.ManifestEvents(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{"formed", "submitted", "accepted", "polled", "done"}; len(kinds) != len(want) || kinds[0] != want[0] || kinds[4] != want[4] ||
		evs[0].Detail["why"] != "test" {
		t.Fatalf("events %v", kinds)
	}
	of, err := b.ledger.ManifestItemsOf(ctx, items[1].RecordingID)
	if err != nil || len(of) != 2 || of[0].ManifestKey != "m-1" || of[1].ManifestKey != "m-3" || of[1].State != ledger.ItemPending {
		t.Fatalf("manifests of a resubmitted recording: %+v (%v)", of, err)
	}
	list, err := b.ledger.Manifests(ctx, ledger.ManifestFilter{State: ledger.ManifestFormed})
	if err != nil || len(list) != 2 {
		t.Fatalf("formed manifests: %d (%v)", len(list), err)
	}
	if byKey, err := b.ledger.ManifestByKey(ctx, "m-2"); err != nil || byKey.ID != m2.ID {
		t.Fatalf("by key: %+v %v", byKey, err)
	}

	// The history is append-only, and a recording is pending in one
	// manifest at most.
	if _, err := b.pool.Exec(ctx, "UPDATE batch_manifest_events SET kind = 'x' WHERE manifest_id = $1", m.ID); sqlState(err) != "CS002" {
		t.Fatalf("updating a manifest event: %v, want CS002", err)
	}
	if _, err := b.pool.Exec(ctx, "DELETE FROM batch_manifests WHERE id = $1", m.ID); sqlState(err) != "CS002" {
		t.Fatalf("deleting a manifest: %v, want CS002", err)
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO batch_manifest_items (manifest_id, recording_id, business_key, position, state, updated_at)
		VALUES ($1, $2, 'k', 99, 'pending', now())`, m2.ID, items[1].RecordingID)
	if sqlState(err) != "23505" {
		t.Fatalf("a second pending item of one recording: %v, want a unique violation", err)
	}
}

func recs0Key(t *testing.T, b *bundle, id uuid.UUID) string {
	t.Helper()
	r, err := b.ledger.Recording(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.BusinessKey
}

// The retention purge removes a purged recording's manifest items, and a
// finished manifest left without items with its history.
func TestRetentionPurgeRemovesManifests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible)
	m, _ := formManifest(t, b, "m-purge", 1, nil)
	for _, mv := range []ledger.ManifestMove{{From: ledger.ManifestFormed, To: ledger.ManifestSubmitted}, {From: ledger.ManifestSubmitted, To: ledger.ManifestDone}} {
		mv.ID, mv.Kind = m.ID, string(mv.To)
		if _, err := b.ledger.ManifestMoveTx(ctx, b.pool, mv); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ledger.SettleItemTx(ctx, b.pool, m.ID, r.ID, ledger.ItemFailed, "", "no speech"); err != nil {
		t.Fatal(err)
	}
	b.walk(t, r, ledger.StateFailed)
	b.clock.Advance(100 * 24 * time.Hour)
	res, err := b.ledger.RetentionPurge(ctx, ledger.PurgeOpts{OlderThan: 90 * 24 * time.Hour}, nil)
	if err != nil || res.Recordings != 1 {
		t.Fatalf("purge %+v %v", res, err)
	}
	if _, _, err := b.ledger.Manifest(ctx, m.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the emptied manifest after the purge: %v, want ErrNotFound", err)
	}
	var n int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM batch_manifest_events WHERE manifest_id = $1", m.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d events left (%v)", n, err)
	}
}
