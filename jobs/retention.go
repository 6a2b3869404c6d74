package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
)

// RetentionArgs runs the retention purge; it runs periodically
// (Config.RetentionEvery).
type RetentionArgs struct{}

// Kind is the River job kind.
func (RetentionArgs) Kind() string { return "retention_purge" }

// InsertOpts: the purge runs on the batch queue, one at a time.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, UniqueOpts: riverunique.ByArgs()}
}

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	p *Pipeline
}

// Timeout bounds a run of the purge (RetentionTimeout).
func (w *retentionWorker) Timeout(*river.Job[RetentionArgs]) time.Duration {
	return w.p.jobTimeout(RetentionTimeout)
}

func (w *retentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	_, err := w.p.RunRetention(ctx, "periodic retention purge")
	return err
}

// RetentionPolicy is the purge's policy from the configuration: each
// tenant's retention, Config.Retention for the rest.
func (p *Pipeline) RetentionPolicy() ledger.PurgeOpts {
	opts := ledger.PurgeOpts{OlderThan: p.cfg.Retention, Tenants: map[string]time.Duration{}}
	for id, t := range p.cfg.Tenants {
		if t.Retention > 0 {
			opts.Tenants[id] = t.Retention
		}
	}
	return opts
}

// RetentionReport is what one run of the purge removed, with the fate of
// each audio object (ledger.AudioDeleted, ...).
type RetentionReport struct {
	ledger.PurgeResult
	Audio map[string]int
}

// RunRetention runs the retention purge under RetentionPolicy: each
// committed batch's audio objects are then removed from the recordings
// root (unless the tenant keeps audio, or another recording still names
// the object) and their fate recorded with the batch. An object the store
// fails to remove is recorded as failed and logged; the purge goes on.
func (p *Pipeline) RunRetention(ctx context.Context, reason string) (RetentionReport, error) {
	opts := p.RetentionPolicy()
	opts.Reason = reason
	rep := RetentionReport{Audio: map[string]int{}}
	res, err := p.ledger.RetentionPurge(ctx, opts, func(b ledger.PurgeBatch) error {
		for _, r := range b.Removed {
			if r.AudioURI == "" {
				continue
			}
			outcome, detail := p.removeAudio(ctx, r)
			rep.Audio[outcome]++
			if err := p.ledger.RecordAudioOutcome(ctx, b.ID, r, outcome, detail); err != nil {
				return err
			}
		}
		return nil
	})
	rep.PurgeResult = res
	if err != nil {
		return rep, err
	}
	if res.Recordings > 0 {
		p.log.Info("retention purge", slog.Int("recordings", res.Recordings), slog.Int("events", res.Events),
			slog.Int("action_sets", res.ActionSets), slog.Int("outbox_rows", res.OutboxRows), slog.Int("batches", res.Batches),
			slog.Any("audio", rep.Audio))
	}
	return rep, nil
}

// removeAudio removes a purged recording's audio object and says what
// became of it.
func (p *Pipeline) removeAudio(ctx context.Context, r ledger.PurgedRecording) (outcome, detail string) {
	if t, ok := p.cfg.Tenants[r.TenantID]; ok && t.KeepAudio {
		return ledger.AudioKept, "pipeline.tenants." + r.TenantID + ".keep_audio"
	}
	inUse, err := p.ledger.AudioInUse(ctx, r.AudioURI)
	if err != nil {
		return ledger.AudioFailed, err.Error()
	}
	if inUse {
		return ledger.AudioShared, "another recording still names it"
	}
	err = p.audio.Delete(ctx, r.AudioURI)
	switch {
	case err == nil:
		return ledger.AudioDeleted, ""
	case errors.Is(err, audio.ErrNotFound):
		return ledger.AudioMissing, ""
	default:
		p.log.Warn("retention purge: the audio object stays", slog.String("recording_id", r.ID.String()), slog.Any("error", err))
		return ledger.AudioFailed, fmt.Sprint(err)
	}
}

// PreviewRetention says, per tenant, what RunRetention would remove now.
func (p *Pipeline) PreviewRetention(ctx context.Context) ([]ledger.TenantPreview, error) {
	return p.ledger.RetentionPreview(ctx, p.RetentionPolicy())
}
