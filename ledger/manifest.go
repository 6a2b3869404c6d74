package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// ManifestState is where a batch manifest stands (migration 00012).
type ManifestState string

// The manifest states: formed → submitted → accepted → done, or
// unbatched (the vendor offers no batches; the items went one by one).
const (
	// ManifestFormed: items chosen; their recordings are still eligible.
	ManifestFormed ManifestState = "formed"
	// ManifestSubmitted: the items' recordings are submitted; the request
	// may have reached the vendor (send it again with the same key).
	ManifestSubmitted ManifestState = "submitted"
	// ManifestAccepted: the vendor's batch id is recorded; poll it.
	ManifestAccepted ManifestState = "accepted"
	// ManifestDone: every item is settled.
	ManifestDone ManifestState = "done"
	// ManifestUnbatched: the vendor answered that it offers no batches;
	// the items were handed to one-by-one submission.
	ManifestUnbatched ManifestState = "unbatched"
)

// ManifestStates lists every manifest state, in order.
func ManifestStates() []ManifestState {
	return []ManifestState{ManifestFormed, ManifestSubmitted, ManifestAccepted, ManifestDone, ManifestUnbatched}
}

// ItemState is where one item of a manifest stands.
type ItemState string

// The item states: pending until settled once.
const (
	ItemPending   ItemState = "pending"
	ItemCompleted ItemState = "completed"
	ItemFailed    ItemState = "failed"
	// ItemResubmit: a transient failure, or lost by the vendor: its
	// recording went back to eligible for a later manifest.
	ItemResubmit ItemState = "resubmit"
	// ItemDropped: its recording had moved on (expired) before the
	// manifest was sent.
	ItemDropped ItemState = "dropped"
)

// ItemStates lists every item state, pending first.
func ItemStates() []ItemState {
	return []ItemState{ItemPending, ItemCompleted, ItemFailed, ItemResubmit, ItemDropped}
}

// Manifest is one batch manifest.
type Manifest struct {
	ID uuid.UUID `json:"id"`
	// Key is the manifest's stable key, the batch request's
	// Idempotency-Key.
	Key           string        `json:"manifest_key"`
	TenantID      string        `json:"tenant_id"`
	Provider      string        `json:"provider"`
	Model         string        `json:"model"`
	Scope         string        `json:"scope"`
	State         ManifestState `json:"state"`
	VendorBatchID string        `json:"vendor_batch_id"`
	Items         int           `json:"items"`
	AudioSeconds  float64       `json:"audio_seconds"`
	// ResubmissionOf is the manifest whose unfinished items this one sends
	// again; nil for a first manifest.
	ResubmissionOf *uuid.UUID `json:"resubmission_of"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// ManifestItem is one recording in a manifest.
type ManifestItem struct {
	ManifestID  uuid.UUID `json:"manifest_id"`
	RecordingID uuid.UUID `json:"recording_id"`
	// BusinessKey is the item's key at the vendor.
	BusinessKey string    `json:"business_key"`
	Position    int       `json:"position"`
	State       ItemState `json:"state"`
	ProviderID  string    `json:"provider_id"`
	Reason      string    `json:"reason"`
	UpdatedAt   time.Time `json:"updated_at"`
	// ManifestKey and ManifestState are set by ManifestItemsOf.
	ManifestKey   string        `json:"manifest_key,omitempty"`
	ManifestState ManifestState `json:"manifest_state,omitempty"`
}

// ManifestEvent is one entry of a manifest's append-only history.
type ManifestEvent struct {
	ID         int64          `json:"id"`
	ManifestID uuid.UUID      `json:"manifest_id"`
	At         time.Time      `json:"at"`
	Kind       string         `json:"kind"`
	Reason     string         `json:"reason"`
	Detail     map[string]any `json:"detail"`
}

// NewManifest is a manifest to form.
type NewManifest struct {
	// Key: required, unique.
	Key                              string
	TenantID, Provider, Model, Scope string
	Recordings                       []Recording
	ResubmissionOf                   *uuid.UUID
	Reason                           string
	Detail                           map[string]any
}

func manifestFrom(m dbsqlc.BatchManifest) Manifest {
	out := Manifest{ID: m.ID, Key: m.ManifestKey, TenantID: m.TenantID, Provider: m.Provider, Model: m.Model, Scope: m.Scope,
		State: ManifestState(m.State), Items: int(m.Items), AudioSeconds: m.AudioSeconds, ResubmissionOf: m.ResubmissionOf,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if m.VendorBatchID != nil {
		out.VendorBatchID = *m.VendorBatchID
	}
	return out
}

func itemFrom(i dbsqlc.BatchManifestItem) ManifestItem {
	out := ManifestItem{ManifestID: i.ManifestID, RecordingID: i.RecordingID, BusinessKey: i.BusinessKey, Position: int(i.Position),
		State: ItemState(i.State), Reason: i.Reason, UpdatedAt: i.UpdatedAt}
	if i.ProviderID != nil {
		out.ProviderID = *i.ProviderID
	}
	return out
}

// BatchCandidatesTx returns up to max eligible batch recordings of the
// tenants that no manifest holds pending, oldest first, locked FOR UPDATE
// in tx (other formers skip them), with, for each one that an earlier
// manifest sent back, that manifest's id. A recording sent back by a
// manifest not yet done is left out until it is: a resubmission carries
// all of its predecessor's unfinished items at once.
func (l *Ledger) BatchCandidatesTx(ctx context.Context, tx pgx.Tx, tenants []string, max int) ([]Recording, map[uuid.UUID]uuid.UUID, error) {
	rows, err := l.queries.BatchCandidates(ctx, tx, dbsqlc.BatchCandidatesParams{Tenants: tenants, MaxRows: int32(max)})
	if err != nil {
		return nil, nil, fmt.Errorf("reading batch candidates: %w", translate(err))
	}
	recs := make([]Recording, len(rows))
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		recs[i], ids[i] = recordingFrom(r), r.ID
	}
	back := map[uuid.UUID]uuid.UUID{}
	if len(ids) == 0 {
		return recs, back, nil
	}
	prev, err := l.queries.BatchLastResubmitted(ctx, tx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("reading batch candidates' earlier manifests: %w", translate(err))
	}
	waiting := map[uuid.UUID]bool{}
	for _, p := range prev {
		back[p.RecordingID] = p.ManifestID
		if s := ManifestState(p.ManifestState); s != ManifestDone && s != ManifestUnbatched {
			waiting[p.RecordingID] = true
		}
	}
	if len(waiting) > 0 {
		kept := recs[:0]
		for _, r := range recs {
			if !waiting[r.ID] {
				kept = append(kept, r)
			}
		}
		recs = kept
	}
	return recs, back, nil
}

// FormManifestTx records a manifest in state formed, with one pending item
// per recording (in order) and its first event, in tx. The recordings do
// not move: the caller submits them later (ManifestMoveTx).
func (l *Ledger) FormManifestTx(ctx context.Context, tx pgx.Tx, n NewManifest) (Manifest, error) {
	if n.Key == "" || len(n.Recordings) == 0 {
		return Manifest{}, &InvalidError{Field: "NewManifest", Reason: "needs a key and at least one recording"}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Manifest{}, err
	}
	p := dbsqlc.BatchManifestInsertParams{ID: id, ManifestKey: n.Key, TenantID: n.TenantID, Provider: n.Provider, Model: n.Model,
		Scope: n.Scope, ResubmissionOf: n.ResubmissionOf, At: l.now(), Reason: n.Reason}
	for _, r := range n.Recordings {
		p.RecordingIds = append(p.RecordingIds, r.ID)
		p.BusinessKeys = append(p.BusinessKeys, r.BusinessKey)
		p.AudioSeconds += r.AudioDuration.Seconds()
	}
	if p.Detail, err = detailJSON(n.Detail); err != nil {
		return Manifest{}, err
	}
	row, err := l.queries.BatchManifestInsert(ctx, tx, p)
	if err != nil {
		return Manifest{}, fmt.Errorf("forming manifest %s: %w", n.Key, translate(err))
	}
	return manifestFrom(dbsqlc.BatchManifest(row)), nil
}

// ManifestMove is a compare-and-set of a manifest's state, recorded as an
// event of kind Kind.
type ManifestMove struct {
	ID       uuid.UUID
	From, To ManifestState
	// VendorBatchID, when set, is recorded (kept otherwise).
	VendorBatchID string
	Kind, Reason  string
	Detail        map[string]any
}

// ManifestConflictError: a manifest was not in the state a move expected
// (another worker moved it first). errors.Is(err, ErrStateConflict) holds.
type ManifestConflictError struct {
	ManifestID       uuid.UUID
	Expected, Actual ManifestState
}

func (e *ManifestConflictError) Error() string {
	return fmt.Sprintf("ledger: manifest %s is %s, not %s: another worker moved it first", e.ManifestID, e.Actual, e.Expected)
}

// Is makes errors.Is(err, ErrStateConflict) true.
func (e *ManifestConflictError) Is(target error) bool { return target == ErrStateConflict }

// ManifestMoveTx applies m in db (a pool or a transaction). A manifest not
// in m.From is a *ManifestConflictError.
func (l *Ledger) ManifestMoveTx(ctx context.Context, db dbsqlc.DBTX, m ManifestMove) (Manifest, error) {
	detail, err := detailJSON(m.Detail)
	if err != nil {
		return Manifest{}, err
	}
	row, err := l.queries.BatchManifestMove(ctx, db, dbsqlc.BatchManifestMoveParams{ToState: string(m.To), At: l.now(),
		VendorBatchID: nonEmptyPtr(m.VendorBatchID), ID: m.ID, FromState: string(m.From), Kind: m.Kind, Reason: m.Reason, Detail: detail})
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := l.queries.BatchManifestGet(ctx, db, m.ID)
		if gerr != nil {
			return Manifest{}, fmt.Errorf("manifest %s: %w", m.ID, translate(gerr))
		}
		return Manifest{}, &ManifestConflictError{ManifestID: m.ID, Expected: m.From, Actual: ManifestState(cur.State)}
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("moving manifest %s to %s: %w", m.ID, m.To, translate(err))
	}
	return manifestFrom(dbsqlc.BatchManifest(row)), nil
}

// ManifestNote records an event that moves nothing (a poll, a throttled
// request).
func (l *Ledger) ManifestNote(ctx context.Context, id uuid.UUID, kind, reason string, detail map[string]any) error {
	raw, err := detailJSON(detail)
	if err != nil {
		return err
	}
	if err := l.queries.BatchManifestNote(ctx, l.pool, dbsqlc.BatchManifestNoteParams{ManifestID: id, At: l.now(), Kind: kind,
		Reason: reason, Detail: raw}); err != nil {
		return fmt.Errorf("noting on manifest %s: %w", id, translate(err))
	}
	return nil
}

// SettleItemTx records a pending item's outcome in db. It reports false
// when the item was not pending (settled before).
func (l *Ledger) SettleItemTx(ctx context.Context, db dbsqlc.DBTX, manifestID, recordingID uuid.UUID, state ItemState, providerID, reason string) (bool, error) {
	_, err := l.queries.BatchItemSettle(ctx, db, dbsqlc.BatchItemSettleParams{State: string(state), ProviderID: nonEmptyPtr(providerID),
		Reason: reason, At: l.now(), ManifestID: manifestID, RecordingID: recordingID})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("settling item %s of manifest %s: %w", recordingID, manifestID, translate(err))
	}
	return true, nil
}

// Manifest returns a manifest and its items, in order.
func (l *Ledger) Manifest(ctx context.Context, id uuid.UUID) (Manifest, []ManifestItem, error) {
	m, err := l.queries.BatchManifestGet(ctx, l.pool, id)
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("manifest %s: %w", id, translate(err))
	}
	rows, err := l.queries.BatchManifestItems(ctx, l.pool, id)
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("items of manifest %s: %w", id, translate(err))
	}
	items := make([]ManifestItem, len(rows))
	for i, r := range rows {
		items[i] = itemFrom(r)
	}
	return manifestFrom(m), items, nil
}

// ManifestByKey returns the manifest with this key.
func (l *Ledger) ManifestByKey(ctx context.Context, key string) (Manifest, error) {
	m, err := l.queries.BatchManifestGetByKey(ctx, l.pool, key)
	if err != nil {
		return Manifest{}, fmt.Errorf("manifest %q: %w", key, translate(err))
	}
	return manifestFrom(m), nil
}

// ManifestFilter selects manifests; zero fields select all.
type ManifestFilter struct {
	State    ManifestState
	TenantID string
	// Limit: default 100.
	Limit int
}

// Manifests returns manifests, newest first.
func (l *Ledger) Manifests(ctx context.Context, f ManifestFilter) ([]Manifest, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := l.queries.BatchManifestList(ctx, l.pool, dbsqlc.BatchManifestListParams{State: nonEmptyPtr(string(f.State)),
		TenantID: nonEmptyPtr(f.TenantID), MaxRows: int32(f.Limit)})
	if err != nil {
		return nil, fmt.Errorf("listing manifests: %w", translate(err))
	}
	out := make([]Manifest, len(rows))
	for i, r := range rows {
		out[i] = manifestFrom(r)
	}
	return out, nil
}

// ManifestEvents returns a manifest's history, oldest first.
func (l *Ledger) ManifestEvents(ctx context.Context, id uuid.UUID) ([]ManifestEvent, error) {
	rows, err := l.queries.BatchManifestEvents(ctx, l.pool, id)
	if err != nil {
		return nil, fmt.Errorf("events of manifest %s: %w", id, translate(err))
	}
	out := make([]ManifestEvent, len(rows))
	for i, r := range rows {
		out[i] = ManifestEvent{ID: r.ID, ManifestID: r.ManifestID, At: r.At, Kind: r.Kind, Reason: r.Reason}
		if err := json.Unmarshal(r.Detail, &out[i].Detail); err != nil {
			return nil, fmt.Errorf("event %d of manifest %s: %w", r.ID, id, err)
		}
	}
	return out, nil
}

// ManifestItemsOf returns every manifest item of a recording, oldest
// manifest first, with the manifests' keys and states.
func (l *Ledger) ManifestItemsOf(ctx context.Context, recordingID uuid.UUID) ([]ManifestItem, error) {
	rows, err := l.queries.BatchItemsOfRecording(ctx, l.pool, recordingID)
	if err != nil {
		return nil, fmt.Errorf("manifests of %s: %w", recordingID, translate(err))
	}
	out := make([]ManifestItem, len(rows))
	for i, r := range rows {
		out[i] = itemFrom(dbsqlc.BatchManifestItem{ManifestID: r.ManifestID, RecordingID: r.RecordingID, BusinessKey: r.BusinessKey,
			Position: r.Position, State: r.State, ProviderID: r.ProviderID, Reason: r.Reason, UpdatedAt: r.UpdatedAt})
		out[i].ManifestKey, out[i].ManifestState = r.ManifestKey, ManifestState(r.ManifestState)
	}
	return out, nil
}

func nonEmptyPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ManifestCount is how many manifests are in a state, with their items.
type ManifestCount struct {
	State     ManifestState
	Manifests int64
	Items     int64
}

// ManifestCounts returns the manifests by state.
func (l *Ledger) ManifestCounts(ctx context.Context) ([]ManifestCount, error) {
	rows, err := l.queries.BatchManifestCounts(ctx, l.pool)
	if err != nil {
		return nil, fmt.Errorf("counting manifests: %w", translate(err))
	}
	out := make([]ManifestCount, len(rows))
	for i, r := range rows {
		out[i] = ManifestCount{State: ManifestState(r.State), Manifests: r.Manifests, Items: r.Items}
	}
	return out, nil
}
