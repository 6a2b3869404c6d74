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
)

// Lane says how urgently a recording is wanted.
type Lane string

// The lanes.
const (
	LaneImmediate Lane = "immediate"
	LaneBatch     Lane = "batch"
)

// Recording is the current row of one recording.
type Recording struct {
	ID          uuid.UUID
	TenantID    string
	CallID      string
	AudioSHA256 string // lower-case hex
	// BusinessKey is tenant_id:call_id:sha256(audio), the recording's
	// identity: ingesting it again converges on this row.
	BusinessKey string
	State       State
	// Attempt counts submissions to the speech vendor.
	Attempt    int
	Lane       Lane
	AudioURI   string
	AudioBytes int64
	// AudioDuration is the audio's length as measured at ingest (from its
	// WAV header). Zero means unknown: the audio is not a WAV file ingest
	// can measure, or the recording was ingested before the ledger stored
	// durations (migration 00004; the column is NULL).
	AudioDuration time.Duration
	// Deadline is when unfinished work expires; zero means none set.
	Deadline  time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	// EventSeq is the sequence number of the latest event.
	EventSeq int
	// Provider and ProviderID: the speech vendor last submitted to and its
	// id for this transcription ("" until known).
	Provider   string
	ProviderID string
	// Model and Language asked for at ingest ("" = the tenant's default /
	// auto-detect).
	Model    string
	Language string
	// NotBefore: in retry_wait, when the recording may be tried again.
	NotBefore time.Time
	// StartedAt: when the call started (for relative dates), zero if unknown.
	StartedAt time.Time
}

// recordingRow is a recordings row as PostgreSQL returns it (SELECT *).
type recordingRow struct {
	ID           uuid.UUID  `db:"id"`
	TenantID     string     `db:"tenant_id"`
	CallID       string     `db:"call_id"`
	AudioSHA256  string     `db:"audio_sha256"`
	BusinessKey  string     `db:"business_key"`
	State        State      `db:"state"`
	Attempt      int        `db:"attempt"`
	Lane         Lane       `db:"lane"`
	AudioURI     string     `db:"audio_uri"`
	AudioBytes   int64      `db:"audio_bytes"`
	Deadline     *time.Time `db:"deadline"`
	CreatedAt    time.Time  `db:"created_at"`
	UpdatedAt    time.Time  `db:"updated_at"`
	LastEventSeq int        `db:"last_event_seq"`
	Provider     string     `db:"provider"`
	ProviderID   string     `db:"provider_id"`
	Model        string     `db:"model"`
	Language     string     `db:"language"`
	NotBefore    *time.Time `db:"not_before"`
	StartedAt    *time.Time `db:"started_at"`
	// AudioDurationMS is NULL when the duration is unknown.
	AudioDurationMS *int64 `db:"audio_duration_ms"`
}

func (r recordingRow) recording() Recording {
	t := func(p *time.Time) time.Time {
		if p == nil {
			return time.Time{}
		}
		return p.UTC()
	}
	var dur time.Duration
	if r.AudioDurationMS != nil {
		dur = time.Duration(*r.AudioDurationMS) * time.Millisecond
	}
	return Recording{
		ID: r.ID, TenantID: r.TenantID, CallID: r.CallID, AudioSHA256: r.AudioSHA256, BusinessKey: r.BusinessKey,
		State: r.State, Attempt: r.Attempt, Lane: r.Lane, AudioURI: r.AudioURI, AudioBytes: r.AudioBytes,
		Deadline: t(r.Deadline), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), EventSeq: r.LastEventSeq,
		Provider: r.Provider, ProviderID: r.ProviderID, Model: r.Model, Language: r.Language,
		NotBefore: t(r.NotBefore), StartedAt: t(r.StartedAt), AudioDuration: dur,
	}
}

// BusinessKey builds tenant_id:call_id:sha256 as the ledger does.
func BusinessKey(tenantID, callID, audioSHA256 string) string {
	return tenantID + ":" + callID + ":" + audioSHA256
}

// scanRecording reads one whole recordings row from a query.
func scanRecording(rows pgx.Rows, err error) (Recording, error) {
	if err != nil {
		return Recording{}, translate(err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[recordingRow])
	if err != nil {
		return Recording{}, translate(err)
	}
	return r.recording(), nil
}

// scanRecordings reads whole recordings rows from a query.
func scanRecordings(rows pgx.Rows, err error) ([]Recording, error) {
	if err != nil {
		return nil, translate(err)
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[recordingRow])
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Recording, len(rs))
	for i, r := range rs {
		out[i] = r.recording()
	}
	return out, nil
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
	if _, err := tx.Exec(ctx, q("RecordingLockCall"), n.TenantID, n.CallID); err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: locking call: %w", n.CallID, translate(err))
	}
	existing, err := scanRecording(tx.Query(ctx, q("RecordingGetByKey"), n.TenantID, n.CallID, n.AudioSHA256))
	if err == nil {
		return IngestResult{Recording: existing}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return IngestResult{}, fmt.Errorf("ingesting %s: looking up business key: %w", n.CallID, err)
	}

	rows, err := tx.Query(ctx, q("RecordingListByCall"), n.TenantID, n.CallID)
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: listing earlier recordings: %w", n.CallID, translate(err))
	}
	type earlier struct {
		ID     uuid.UUID `json:"id"`
		Digest string    `json:"audio_sha256"`
	}
	prev, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (earlier, error) {
		var e earlier
		return e, r.Scan(&e.ID, &e.Digest)
	})
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: listing earlier recordings: %w", n.CallID, translate(err))
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
	var deadline *time.Time
	if !n.Deadline.IsZero() {
		d := dbTime(n.Deadline)
		deadline = &d
	}
	id, err := uuid.NewV7()
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: new id: %w", n.CallID, err)
	}
	var startedAt *time.Time
	if !n.StartedAt.IsZero() {
		st := dbTime(n.StartedAt)
		startedAt = &st
	}
	var durationMS *int64
	if n.AudioDuration > 0 {
		ms := n.AudioDuration.Milliseconds()
		durationMS = &ms
	}
	rec, err := scanRecording(tx.Query(ctx, q("RecordingInsert"), id, n.TenantID, n.CallID, n.AudioSHA256,
		string(n.Lane), n.AudioURI, n.AudioBytes, deadline, l.now(), reason, detail, n.Model, n.Language, startedAt, durationMS))
	if err != nil {
		return IngestResult{}, fmt.Errorf("ingesting %s: %w", n.CallID, err)
	}
	res.Recording = rec
	return res, nil
}

// Recording returns the current row of one recording, or ErrNotFound.
func (l *Ledger) Recording(ctx context.Context, id uuid.UUID) (Recording, error) {
	r, err := scanRecording(l.pool.Query(ctx, q("RecordingGet"), id))
	if err != nil {
		return Recording{}, fmt.Errorf("reading recording %s: %w", id, err)
	}
	return r, nil
}

// RecordingByKey returns the recording with this business key, or ErrNotFound.
func (l *Ledger) RecordingByKey(ctx context.Context, tenantID, callID, audioSHA256 string) (Recording, error) {
	r, err := scanRecording(l.pool.Query(ctx, q("RecordingGetByKey"), tenantID, callID, strings.ToLower(audioSHA256)))
	if err != nil {
		return Recording{}, fmt.Errorf("reading recording %s: %w", BusinessKey(tenantID, callID, audioSHA256), err)
	}
	return r, nil
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
	var from, to *time.Time
	if !f.From.IsZero() {
		from = &f.From
	}
	if !f.To.IsZero() {
		to = &f.To
	}
	rs, err := scanRecordings(l.pool.Query(ctx, q("RecordingList"), string(f.State), f.TenantID, f.Limit, from, to))
	if err != nil {
		return nil, fmt.Errorf("listing recordings: %w", err)
	}
	return rs, nil
}

// RecordingsByCall lists every recording of one call (one per audio digest).
func (l *Ledger) RecordingsByCall(ctx context.Context, tenantID, callID string) ([]Recording, error) {
	rs, err := scanRecordings(l.pool.Query(ctx, q("RecordingListByCallID"), tenantID, callID))
	if err != nil {
		return nil, fmt.Errorf("listing recordings of call %s: %w", callID, err)
	}
	return rs, nil
}

// Overdue returns up to limit ids of unfinished recordings whose deadline
// has passed at now.
func (l *Ledger) Overdue(ctx context.Context, now time.Time, limit int) ([]uuid.UUID, error) {
	rows, err := l.pool.Query(ctx, q("RecordingListOverdue"), dbTime(now), limit)
	if err != nil {
		return nil, fmt.Errorf("listing overdue recordings: %w", translate(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("listing overdue recordings: %w", translate(err))
	}
	return ids, nil
}

// CountByState counts recordings per state.
func (l *Ledger) CountByState(ctx context.Context) (map[State]int, error) {
	rows, err := l.pool.Query(ctx, q("RecordingCountByState"))
	if err != nil {
		return nil, fmt.Errorf("counting recordings: %w", translate(err))
	}
	out := map[State]int{}
	var st State
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[st] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("counting recordings: %w", translate(err))
	}
	return out, nil
}
