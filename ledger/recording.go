package ledger

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// Lane says how urgently a recording is wanted: the one lane type of the
// ledger, the pipeline and capacity.
type Lane = lane.Lane

// The lanes of a recording, stored as these strings.
const (
	LaneImmediate = lane.Immediate
	LaneBatch     = lane.Batch
)

// Lanes lists every lane.
func Lanes() []Lane { return []Lane{LaneImmediate, LaneBatch} }

// Recording is the current row of one recording.
type Recording struct {
	ID          uuid.UUID `json:"id"`
	TenantID    string    `json:"tenant_id"`
	CallID      string    `json:"call_id"`
	AudioSHA256 string    `json:"audio_sha256"` // lower-case hex
	// BusinessKey is tenant_id:call_id:sha256(audio), the recording's
	// identity: ingesting it again converges on this row.
	BusinessKey string `json:"business_key"`
	State       State  `json:"state"`
	// Attempt counts submissions to the speech vendor.
	Attempt    int    `json:"attempt"`
	Lane       Lane   `json:"lane"`
	AudioURI   string `json:"audio_uri"`
	AudioBytes int64  `json:"audio_bytes"`
	// AudioDuration is the audio's length as measured at ingest (from its
	// WAV header). Zero means unknown: the audio is not a WAV file ingest
	// can measure, or the recording was ingested before the ledger stored
	// durations (migration 00004; the column is NULL). In JSON, in
	// nanoseconds (a Go time.Duration).
	AudioDuration time.Duration `json:"audio_duration_ns"`
	// Deadline is when unfinished work expires; zero means none set.
	Deadline  time.Time `json:"deadline"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// EventSeq is the sequence number of the latest event.
	EventSeq int `json:"event_seq"`
	// Provider and ProviderID: the speech vendor last submitted to and its
	// id for this transcription ("" until known).
	Provider   string `json:"provider"`
	ProviderID string `json:"provider_id"`
	// Model and Language asked for at ingest ("" = the tenant's default /
	// auto-detect).
	Model    string `json:"model"`
	Language string `json:"language"`
	// NotBefore: in retry_wait, when the recording may be tried again.
	NotBefore time.Time `json:"not_before"`
	// StartedAt: when the call started (for relative dates), zero if unknown.
	StartedAt time.Time `json:"started_at"`
}

// recordingFrom converts a recordings row as the generated queries return it.
func recordingFrom(r dbsqlc.Recording) Recording {
	var dur time.Duration
	if r.AudioDurationMs != nil {
		dur = time.Duration(*r.AudioDurationMs) * time.Millisecond
	}
	return Recording{
		ID: r.ID, TenantID: r.TenantID, CallID: r.CallID, AudioSHA256: r.AudioSha256, BusinessKey: deref(r.BusinessKey),
		State: State(r.State), Attempt: int(r.Attempt), Lane: Lane(r.Lane), AudioURI: r.AudioUri, AudioBytes: r.AudioBytes,
		Deadline: pgtime.Read(r.Deadline), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), EventSeq: int(r.LastEventSeq),
		Provider: r.Provider, ProviderID: r.ProviderID, Model: r.Model, Language: r.Language,
		NotBefore: pgtime.Read(r.NotBefore), StartedAt: pgtime.Read(r.StartedAt), AudioDuration: dur,
	}
}

func recordingsFrom(rs []dbsqlc.Recording) []Recording {
	out := make([]Recording, len(rs))
	for i, r := range rs {
		out[i] = recordingFrom(r)
	}
	return out
}

// BusinessKey builds tenant_id:call_id:sha256 as the ledger does.
func BusinessKey(tenantID, callID, audioSHA256 string) string {
	return tenantID + ":" + callID + ":" + audioSHA256
}

// NewRecording is what Ingest needs to know about a recording.
type NewRecording struct {
	// TenantID: required, must not contain ':'.
	TenantID string
	// CallID: required.
	CallID string
	// AudioSHA256: required, 64 hex digits (upper case is accepted and
	// stored lower case).
	AudioSHA256 string
	// Lane: LaneImmediate or LaneBatch. Default: LaneBatch.
	Lane Lane
	// AudioURI locates the audio. It may carry credentials, so the ledger
	// never logs it.
	AudioURI string
	// AudioBytes is the audio's size; must not be negative.
	AudioBytes int64
	// AudioDuration is the audio's length, stored in whole milliseconds.
	// Default 0: unknown (stored as NULL); must not be negative.
	AudioDuration time.Duration
	// Deadline: when unfinished work expires. Zero: none yet.
	Deadline time.Time
	// Model: the speech model to ask for. Default "": the tenant's.
	Model string
	// Language: ISO 639-1 code of the call. Default "": auto-detect.
	Language string
	// StartedAt: when the call started. Zero: unknown.
	StartedAt time.Time
	// Route: how the lane was chosen, recorded in the first event's
	// detail under "route". Nil: nothing recorded.
	Route *IngestRoute
}

// IngestRoute is ingest's routing decision for a recording: its lane, and
// why.
type IngestRoute struct {
	// Lane is the lane chosen (the recording's Lane).
	Lane Lane `json:"lane"`
	// OneByOne: the recording is batch work whose vendor has no batch
	// contract, so it is submitted alone, in the batch queue at lower
	// priority.
	OneByOne bool `json:"one_by_one,omitempty"`
	// Reason says why, for people: asked for, or the rule that decided.
	Reason string `json:"reason"`
}

func (n *NewRecording) normalize() error {
	if n.TenantID == "" {
		return &InvalidError{Field: "TenantID", Reason: "is required"}
	}
	if strings.Contains(n.TenantID, ":") {
		return &InvalidError{Field: "TenantID", Reason: fmt.Sprintf("%q must not contain ':' (it separates the business key)", n.TenantID)}
	}
	if n.CallID == "" {
		return &InvalidError{Field: "CallID", Reason: "is required"}
	}
	n.AudioSHA256 = strings.ToLower(n.AudioSHA256)
	if b, err := hex.DecodeString(n.AudioSHA256); err != nil || len(b) != 32 {
		return &InvalidError{Field: "AudioSHA256", Reason: fmt.Sprintf("%q is not 64 hex digits", n.AudioSHA256)}
	}
	if n.Lane == "" {
		n.Lane = LaneBatch
	}
	if n.Lane != LaneImmediate && n.Lane != LaneBatch {
		return &InvalidError{Field: "Lane", Reason: fmt.Sprintf("%q is neither %q nor %q", n.Lane, LaneImmediate, LaneBatch)}
	}
	if n.AudioBytes < 0 {
		return &InvalidError{Field: "AudioBytes", Reason: "must not be negative"}
	}
	if n.AudioDuration < 0 {
		return &InvalidError{Field: "AudioDuration", Reason: "must not be negative"}
	}
	return nil
}

// IngestResult says what Ingest did.
type IngestResult struct {
	Recording Recording
	// Created is false when the business key was already known: Recording
	// is then the existing row, unchanged.
	Created bool
	// CallIDReused is true when this tenant's call_id was already known
	// with a different audio digest. The new recording is kept; its first
	// event carries the flag and the earlier recordings' ids.
	CallIDReused      bool
	EarlierRecordings []uuid.UUID
}

// Ingest records a recording in state received with its first event, or
// returns the existing row when its business key is already known.
func (l *Ledger) Ingest(ctx context.Context, n NewRecording) (IngestResult, error) {
	var res IngestResult
	err := l.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = l.IngestTx(ctx, tx, n)
		return err
	})
	return res, err
}

// IngestTx is Ingest inside the caller's transaction.
func (l *Ledger) IngestTx(ctx context.Context, tx pgx.Tx, n NewRecording) (IngestResult, error) {
	if err := n.normalize(); err != nil {
		return IngestResult{}, err
	}
	// Serialise ingests of one call so that a second digest always sees
	// the first and is flagged.
	if err := l.queries.RecordingLockCall(ctx, tx, dbsqlc.RecordingLockCallParams{TenantID: n.TenantID, CallID: n.CallID}); err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: locking call: %w", n.CallID, translate(err))
	}
	existing, err := l.queries.RecordingGetByKey(ctx, tx, dbsqlc.RecordingGetByKeyParams{TenantID: n.TenantID, CallID: n.CallID, AudioSha256: n.AudioSHA256})
	if err == nil {
		return IngestResult{Recording: recordingFrom(existing)}, nil
	}
	if err = translate(err); !errors.Is(err, ErrNotFound) {
		return IngestResult{}, fmt.Errorf("ingesting %s: looking up business key: %w", n.CallID, err)
	}

	digests, err := l.queries.RecordingListDigestsByCall(ctx, tx, dbsqlc.RecordingListDigestsByCallParams{TenantID: n.TenantID, CallID: n.CallID})
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: listing earlier recordings: %w", n.CallID, translate(err))
	}
	type earlier struct {
		ID     uuid.UUID `json:"id"`
		Digest string    `json:"audio_sha256"`
	}
	prev := make([]earlier, len(digests))
	for i, d := range digests {
		prev[i] = earlier{ID: d.ID, Digest: d.AudioSha256}
	}

	reason := "ingested"
	detail := map[string]any{}
	res := IngestResult{Created: true}
	if len(prev) > 0 {
		reason = "call_id already ingested with a different audio digest; kept as a new recording"
		detail["call_id_reused"] = true
		detail["earlier_recordings"] = prev
		res.CallIDReused = true
		for _, p := range prev {
			res.EarlierRecordings = append(res.EarlierRecordings, p.ID)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: new id: %w", n.CallID, err)
	}
	var durationMS *int64
	if n.AudioDuration > 0 {
		ms := n.AudioDuration.Milliseconds()
		durationMS = &ms
	}
	rawDetail, err := detailJSON(detail)
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: %w", n.CallID, err)
	}
	rec, err := l.queries.RecordingInsert(ctx, tx, dbsqlc.RecordingInsertParams{
		ID: id, TenantID: n.TenantID, CallID: n.CallID, AudioSha256: n.AudioSHA256, Lane: string(n.Lane),
		AudioUri: n.AudioURI, AudioBytes: n.AudioBytes, Deadline: pgtime.WriteOrNull(n.Deadline), At: l.now(),
		Model: n.Model, Language: n.Language, StartedAt: pgtime.WriteOrNull(n.StartedAt), AudioDurationMs: durationMS,
		Reason: reason, Detail: rawDetail,
	})
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: %w", n.CallID, translate(err))
	}
	res.Recording = recordingFrom(dbsqlc.Recording(rec))
	return res, nil
}

// Recording returns the current row of one recording, or ErrNotFound.
func (l *Ledger) Recording(ctx context.Context, id uuid.UUID) (Recording, error) {
	r, err := l.queries.RecordingGet(ctx, l.pool, id)
	if err != nil {
		return Recording{}, fmt.Errorf("reading recording %s: %w", id, translate(err))
	}
	return recordingFrom(r), nil
}

// RecordingByKey returns the recording with this business key, or ErrNotFound.
func (l *Ledger) RecordingByKey(ctx context.Context, tenantID, callID, audioSHA256 string) (Recording, error) {
	r, err := l.queries.RecordingGetByKey(ctx, l.pool, dbsqlc.RecordingGetByKeyParams{
		TenantID: tenantID, CallID: callID, AudioSha256: strings.ToLower(audioSHA256),
	})
	if err != nil {
		return Recording{}, fmt.Errorf("reading recording %s: %w", BusinessKey(tenantID, callID, audioSHA256), translate(err))
	}
	return recordingFrom(r), nil
}

// RecordingFilter narrows Recordings.
type RecordingFilter struct {
	State    State  // "" = any
	TenantID string // "" = any
	Limit    int    // 0 = 1000
	// From and To bound the ingest time (created_at), To exclusive; zero:
	// unbounded.
	From, To time.Time
}

// Recordings lists recordings, oldest first.
func (l *Ledger) Recordings(ctx context.Context, f RecordingFilter) ([]Recording, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	rs, err := l.queries.RecordingList(ctx, l.pool, dbsqlc.RecordingListParams{
		State: string(f.State), TenantID: f.TenantID, MaxRows: int64(f.Limit),
		CreatedFrom: pgtime.WriteOrNull(f.From), CreatedTo: pgtime.WriteOrNull(f.To),
	})
	if err != nil {
		return nil, fmt.Errorf("listing recordings: %w", translate(err))
	}
	return recordingsFrom(rs), nil
}

// RecordingsByCall lists every recording of one call (one per audio digest).
func (l *Ledger) RecordingsByCall(ctx context.Context, tenantID, callID string) ([]Recording, error) {
	rs, err := l.queries.RecordingListByCall(ctx, l.pool, dbsqlc.RecordingListByCallParams{TenantID: tenantID, CallID: callID})
	if err != nil {
		return nil, fmt.Errorf("listing recordings of call %s: %w", callID, translate(err))
	}
	return recordingsFrom(rs), nil
}

// Overdue returns up to limit ids of unfinished recordings whose deadline
// has passed at now.
func (l *Ledger) Overdue(ctx context.Context, now time.Time, limit int) ([]uuid.UUID, error) {
	ids, err := l.queries.RecordingListOverdue(ctx, l.pool, dbsqlc.RecordingListOverdueParams{
		Now: pgtime.Write(now), MaxRows: int64(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing overdue recordings: %w", translate(err))
	}
	return ids, nil
}

// CountByState counts recordings per state.
func (l *Ledger) CountByState(ctx context.Context) (map[State]int, error) {
	rows, err := l.queries.RecordingCountByState(ctx, l.pool)
	if err != nil {
		return nil, fmt.Errorf("counting recordings: %w", translate(err))
	}
	out := map[State]int{}
	for _, r := range rows {
		out[State(r.State)] = int(r.Recordings)
	}
	return out, nil
}

// StateCount is how many recordings of one tenant and lane are in one
// state.
type StateCount struct {
	TenantID   string `json:"tenant_id"`
	Lane       Lane   `json:"lane"`
	State      State  `json:"state"`
	Recordings int    `json:"recordings"`
}

// CountByTenantLaneState counts recordings per tenant, lane and state,
// sorted by tenant, lane, then state; combinations with none are left out.
func (l *Ledger) CountByTenantLaneState(ctx context.Context) ([]StateCount, error) {
	rows, err := l.queries.RecordingCountByTenantLaneState(ctx, l.pool)
	if err != nil {
		return nil, fmt.Errorf("counting recordings by tenant and lane: %w", translate(err))
	}
	out := make([]StateCount, len(rows))
	for i, r := range rows {
		out[i] = StateCount{TenantID: r.TenantID, Lane: Lane(r.Lane), State: State(r.State), Recordings: int(r.Recordings)}
	}
	return out, nil
}

// PageFilter narrows RecordingPage.
type PageFilter struct {
	State    State  // "" = any
	TenantID string // "" = any
	Lane     Lane   // "" = any
	// From and To bound the ingest time (created_at), To exclusive; zero:
	// unbounded.
	From, To time.Time
	// After is the cursor: the recordings after it in (created_at, id)
	// order. Zero: from the first.
	After PageCursor
	Limit int // 0 = 100
}

// PageCursor is a position in (created_at, id) order: the last recording
// of the previous page.
type PageCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// IsZero reports whether c is the start.
func (c PageCursor) IsZero() bool { return c.ID == uuid.Nil }

// RecordingPage lists up to Limit recordings after f.After, oldest first,
// and the cursor of the next page (zero when this one is the last).
func (l *Ledger) RecordingPage(ctx context.Context, f PageFilter) ([]Recording, PageCursor, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	p := dbsqlc.RecordingPageParams{State: string(f.State), TenantID: f.TenantID, Lane: string(f.Lane), MaxRows: int64(f.Limit) + 1,
		CreatedFrom: pgtime.WriteOrNull(f.From), CreatedTo: pgtime.WriteOrNull(f.To)}
	if !f.After.IsZero() {
		at, id := pgtime.Write(f.After.CreatedAt), f.After.ID
		p.AfterCreated, p.AfterID = &at, &id
	}
	rs, err := l.queries.RecordingPage(ctx, l.pool, p)
	if err != nil {
		return nil, PageCursor{}, fmt.Errorf("listing recordings: %w", translate(err))
	}
	out := recordingsFrom(rs)
	var next PageCursor
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = PageCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return out, next, nil
}
