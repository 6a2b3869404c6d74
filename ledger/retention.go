package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// PurgeOpts tunes RetentionPurge and RetentionPreview.
type PurgeOpts struct {
	// OlderThan: terminal recordings last changed longer ago than this are
	// removed, for every tenant without its own entry in Tenants. Default:
	// Config.Retention. No tenant is ever kept forever by omission.
	OlderThan time.Duration
	// Tenants: a retention per tenant, overriding OlderThan. Each must be
	// positive.
	Tenants map[string]time.Duration
	// BatchSize: recordings removed per transaction. Default: PurgeBatchDefault.
	BatchSize int
	// Reason is recorded with each purge batch. Default: "retention".
	Reason string
}

// PurgedRecording is one recording a purge batch removed, with its audio
// object's key ("" when it had none) for the caller to remove from the
// blob store.
type PurgedRecording struct {
	ID       uuid.UUID
	TenantID string
	AudioURI string
}

// PurgeBatch is one committed batch of the purge, as recorded in
// retention_purges.
type PurgeBatch struct {
	ID                                                      int64
	Recordings, Events, Transcripts, ActionSets, OutboxRows int
	OutboxEvents, Extensions                                int
	Removed                                                 []PurgedRecording
}

// PurgeResult counts what RetentionPurge removed.
type PurgeResult struct {
	// Cutoff is the default cutoff (OlderThan before now); Cutoffs each
	// listed tenant's.
	Cutoff  time.Time
	Cutoffs map[string]time.Time
	PurgeBatch
	Batches int
}

// retentionArgs are a purge's cutoffs as the SQL functions take them.
type retentionArgs struct {
	tenants  []string
	cutoffs  []time.Time
	fallback time.Time
	policy   []byte
}

func (l *Ledger) retentionArgs(opts *PurgeOpts, now time.Time) (retentionArgs, error) {
	if opts.OlderThan == 0 {
		opts.OlderThan = l.config.Retention
	}
	if opts.OlderThan < 0 {
		return retentionArgs{}, &InvalidError{Field: "OlderThan", Reason: "must be positive"}
	}
	a := retentionArgs{fallback: pgtime.Write(now.Add(-opts.OlderThan))}
	policy := map[string]string{"*": opts.OlderThan.String()}
	ids := make([]string, 0, len(opts.Tenants))
	for id := range opts.Tenants {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		d := opts.Tenants[id]
		if d <= 0 {
			return retentionArgs{}, &InvalidError{Field: "Tenants[" + id + "]", Reason: "must be positive (no tenant is kept forever)"}
		}
		a.tenants = append(a.tenants, id)
		a.cutoffs = append(a.cutoffs, pgtime.Write(now.Add(-d)))
		policy[id] = d.String()
	}
	var err error
	if a.policy, err = json.Marshal(policy); err != nil {
		return retentionArgs{}, err
	}
	return a, nil
}

// RetentionPurge removes the whole footprint (events, row, transcript,
// action sets, outbox rows and their events, the scope extensions it
// caused) of terminal recordings older than their tenant's retention and
// with no delivery still pending, in batches of short transactions. Each
// batch is recorded in retention_purges, and handed to each (when not
// nil) after its commit: the caller removes the audio objects and records
// their fate (RecordAudioOutcome). This is the only path by which history
// is ever deleted; the database refuses every other.
func (l *Ledger) RetentionPurge(ctx context.Context, opts PurgeOpts, each func(PurgeBatch) error) (PurgeResult, error) {
	if opts.BatchSize == 0 {
		opts.BatchSize = PurgeBatchDefault
	}
	if opts.BatchSize < 0 {
		return PurgeResult{}, &InvalidError{Field: "BatchSize", Reason: "must be positive"}
	}
	if opts.Reason == "" {
		opts.Reason = "retention"
	}
	now := l.now()
	a, err := l.retentionArgs(&opts, now)
	if err != nil {
		return PurgeResult{}, err
	}
	res := PurgeResult{Cutoff: a.fallback, Cutoffs: map[string]time.Time{}}
	for i, t := range a.tenants {
		res.Cutoffs[t] = a.cutoffs[i]
	}
	for {
		row, err := l.queries.RetentionPurgeBatch(ctx, l.pool, dbsqlc.RetentionPurgeBatchParams{
			Tenants: orEmpty(a.tenants), Cutoffs: orEmptyTimes(a.cutoffs), DefaultCutoff: a.fallback, At: now,
			MaxRecordings: int32(min(opts.BatchSize, math.MaxInt32)), Reason: opts.Reason, Policy: a.policy,
		})
		if err != nil {
			return res, fmt.Errorf("purging histories past retention (default cutoff %s): %w", a.fallback.Format(time.RFC3339), translate(err))
		}
		b := PurgeBatch{ID: row.PurgeID, Recordings: int(row.RecordingsDeleted), Events: int(row.EventsDeleted),
			Transcripts: int(row.TranscriptsDeleted), ActionSets: int(row.ActionSetsDeleted), OutboxRows: int(row.OutboxDeleted),
			OutboxEvents: int(row.OutboxEventsDeleted), Extensions: int(row.ExtensionsDeleted)}
		for i, id := range row.VictimIds {
			b.Removed = append(b.Removed, PurgedRecording{ID: id, TenantID: at(row.VictimTenants, i), AudioURI: at(row.VictimAudio, i)})
		}
		res.Batches++
		res.Recordings += b.Recordings
		res.Events += b.Events
		res.Transcripts += b.Transcripts
		res.ActionSets += b.ActionSets
		res.OutboxRows += b.OutboxRows
		res.OutboxEvents += b.OutboxEvents
		res.Extensions += b.Extensions
		res.Removed = append(res.Removed, b.Removed...)
		if each != nil && b.Recordings > 0 {
			if err := each(b); err != nil {
				return res, err
			}
		}
		if b.Recordings < opts.BatchSize {
			return res, nil
		}
	}
}

// TenantPreview is what the purge would remove now from one tenant.
type TenantPreview struct {
	TenantID     string    `json:"tenant_id"`
	Cutoff       time.Time `json:"cutoff"`
	Recordings   int       `json:"recordings"`
	Events       int       `json:"events"`
	Transcripts  int       `json:"transcripts"`
	ActionSets   int       `json:"action_sets"`
	OutboxRows   int       `json:"outbox_rows"`
	OutboxEvents int       `json:"outbox_events"`
	Extensions   int       `json:"scope_extensions"`
	AudioObjects int       `json:"audio_objects"`
	Oldest       time.Time `json:"oldest"`
}

// RetentionPreview says, per tenant, what RetentionPurge with opts would
// remove now, changing nothing.
func (l *Ledger) RetentionPreview(ctx context.Context, opts PurgeOpts) ([]TenantPreview, error) {
	now := l.now()
	a, err := l.retentionArgs(&opts, now)
	if err != nil {
		return nil, err
	}
	rows, err := l.queries.RetentionPreview(ctx, l.pool, dbsqlc.RetentionPreviewParams{
		Tenants: orEmpty(a.tenants), Cutoffs: orEmptyTimes(a.cutoffs), DefaultCutoff: a.fallback})
	if err != nil {
		return nil, fmt.Errorf("previewing the retention purge: %w", translate(err))
	}
	out := make([]TenantPreview, len(rows))
	for i, r := range rows {
		cut := a.fallback
		if j := slices.Index(a.tenants, r.TenantID); j >= 0 {
			cut = a.cutoffs[j]
		}
		out[i] = TenantPreview{TenantID: r.TenantID, Cutoff: cut, Recordings: int(r.Recordings), Events: int(r.Events),
			Transcripts: int(r.Transcripts), ActionSets: int(r.ActionSets), OutboxRows: int(r.OutboxRows),
			OutboxEvents: int(r.OutboxEvents), Extensions: int(r.Extensions), AudioObjects: int(r.AudioObjects),
			Oldest: r.Oldest.UTC()}
	}
	return out, nil
}

// The fates of a purged recording's audio object (retention_audio.outcome).
const (
	AudioDeleted = "deleted" // removed from the blob store
	AudioKept    = "kept"    // kept by the tenant's policy
	AudioShared  = "shared"  // another recording still names it
	AudioMissing = "missing" // already gone
	AudioFailed  = "failed"  // the store refused; detail says why
)

// AudioInUse reports whether any recording still names the audio object.
func (l *Ledger) AudioInUse(ctx context.Context, audioURI string) (bool, error) {
	in, err := l.queries.AudioInUse(ctx, l.pool, audioURI)
	if err != nil {
		return false, fmt.Errorf("checking whether audio %q is in use: %w", audioURI, translate(err))
	}
	return in, nil
}

// RecordAudioOutcome records what became of a purged recording's audio
// object, with the purge batch that removed the recording.
func (l *Ledger) RecordAudioOutcome(ctx context.Context, batchID int64, r PurgedRecording, outcome, detail string) error {
	err := l.queries.RetentionAudioRecord(ctx, l.pool, dbsqlc.RetentionAudioRecordParams{
		PurgeID: batchID, RecordingID: r.ID, TenantID: r.TenantID, AudioUri: r.AudioURI, Outcome: outcome,
		Detail: detail, At: l.now(),
	})
	if err != nil {
		return fmt.Errorf("recording the fate of audio %q: %w", r.AudioURI, translate(err))
	}
	return nil
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyTimes(s []time.Time) []time.Time {
	if s == nil {
		return []time.Time{}
	}
	return s
}
