package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/ledger"
)

// validate: transcribed -> validated, or failed with a reason a person can
// act on. The audio's duration is the one ingest measured and the ledger
// keeps (Recording.AudioDuration); the audio is not read again. When it is
// unknown (not a WAV file ingest could measure, or ingested before the
// ledger kept durations) the duration check is skipped, and the event says
// so in its detail (audio_duration: unknown).
func (p *Pipeline) validate(ctx context.Context, s *stepCtx) error {
	tr, err := p.ledger.Transcript(ctx, s.rec.ID)
	if err != nil {
		return err
	}
	var detail map[string]any
	if s.rec.AudioDuration == 0 {
		detail = map[string]any{"audio_duration": "unknown: duration check skipped"}
		s.log.Info("audio duration unknown; validating without the duration check")
	}
	t := s.tenant
	verr := crm.Validate(crm.Transcript{Text: tr.Text, Language: tr.Language, Confidence: tr.Confidence, DurationSeconds: tr.DurationSeconds},
		crm.Rules{MinConfidence: t.MinConfidence, Languages: t.Languages, AudioDuration: s.rec.AudioDuration,
			DurationTolerance: p.cfg.DurationTolerance, DurationSlack: p.cfg.DurationSlack})
	if verr != nil {
		var ve *crm.ValidationError
		class := "validation"
		if errors.As(verr, &ve) {
			class = "validation_" + ve.Check
		}
		_, err := p.move(ctx, s.rec, ledger.StateFailed, verr.Error(), func(e *ledger.Transition) { e.ResponseClass, e.Detail = class, detail })
		return err
	}
	_, err = p.move(ctx, s.rec, ledger.StateValidated, "transcript valid", func(e *ledger.Transition) { e.Detail = detail })
	return err
}

// commit: validated -> committed. The actions are extracted from the
// transcript and committed with their outbox row and delivery job in one
// transaction (outbox.Commit). Work that already has a transcript goes on
// during a vendor cooldown: nothing here asks the speech vendor's scope.
func (p *Pipeline) commit(ctx context.Context, s *stepCtx) error {
	rec := s.rec
	tr, err := p.ledger.Transcript(ctx, rec.ID)
	if err != nil {
		return err
	}
	var loc *time.Location
	if tz := s.tenant.TimeZone; tz != "" {
		// Config.Validate checked the name; a failure here is the
		// system's time zone database going missing.
		if loc, err = time.LoadLocation(tz); err != nil {
			return fmt.Errorf("tenant %s time zone: %w", rec.TenantID, err)
		}
	}
	actions, err := p.extractor.Extract(ctx, crm.ExtractInput{TenantID: rec.TenantID, CallID: rec.CallID, Text: tr.Text,
		StartedAt: rec.StartedAt, Location: loc})
	if err != nil {
		return fmt.Errorf("extracting actions of %s: %w", rec.CallID, err)
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return fmt.Errorf("committing %s: %w", rec.CallID, err)
	}
	duplicate, err := p.commitActions(ctx, client, rec, actions)
	if err != nil {
		return err
	}
	if duplicate {
		s.log.Info("commit converged on another worker's action set")
	} else {
		p.metrics.Committed(rec.TenantID, string(rec.Lane), rec.Attempt, p.cfg.Clock.Now().Sub(rec.CreatedAt))
	}
	faultPoint("between_commit_and_delivery")
	return nil
}
