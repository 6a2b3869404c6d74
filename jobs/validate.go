package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/ledger"
)

// finish takes a recording that has its transcript to committed in one
// transaction, writing one event per transition: submitted → transcribed
// (with fresh, the transcript the vendor just returned), transcribed →
// validated (or failed, with a reason a person can act on), and validated →
// committed (the action set, its outbox row and delivery job, through
// Commit). A recording found in transcribed or validated (an older step,
// or an extraction that failed) starts from there, with its stored
// transcript. Nothing here asks the speech vendor's scope: work that has a
// transcript goes on during a cooldown. The actions are extracted before
// the transaction begins (an extractor may take its time); one that fails
// leaves the recording validated, its transcript kept, and the job retries
// the commit.
//
// The audio's duration is the one ingest measured and the ledger keeps
// (Recording.AudioDuration); the audio is not read again. When it is
// unknown (not a WAV file ingest could measure, or ingested before the
// ledger kept durations) the duration check is skipped, and the event says
// so in its detail (audio_duration: unknown).
func (p *Pipeline) finish(ctx context.Context, s *stepCtx, fresh *freshTranscript) error {
	rec := s.rec
	tr, err := p.transcriptOf(ctx, rec, fresh)
	if err != nil {
		return err
	}
	var check validation
	if rec.State != ledger.StateValidated {
		check = p.check(s, tr)
	}
	commit := p.commitActions != nil && check.err == nil
	var actions []crm.Action
	var extractErr error
	var client *river.Client[pgx.Tx]
	if commit {
		actions, extractErr = p.extract(ctx, s, tr)
		if client, err = river.ClientFromContextSafely[pgx.Tx](ctx); err != nil {
			return fmt.Errorf("committing %s: %w", rec.CallID, err)
		}
	}
	steps, validations, doCommit := finishSteps(rec, fresh, check, commit && extractErr == nil)
	validated := rec
	validated.State = ledger.StateValidated
	var committed, duplicate bool
	// One transaction, shared with other recordings' steps (group
	// commit); it may run twice (its group rolled back, then alone), so
	// it sets what it reports by assignment. Step by step: the set's
	// statements, then the recording's move (one statement: one event per
	// step, one row update in all).
	alone := func(ctx context.Context, tx pgx.Tx) error {
		committed, duplicate = false, false
		moves := steps
		if doCommit {
			step, dup, err := p.commitActions(ctx, tx, client, validated, actions, validations)
			if err != nil {
				return err
			}
			if duplicate = dup; !dup {
				moves = append(slices.Clip(steps), step)
			}
		}
		if err := p.advance(ctx, tx, rec, moves, fresh); err != nil {
			return err
		}
		committed = doCommit
		if doCommit && fresh != nil {
			faultPoint("before_transcript_commit")
		}
		return nil
	}
	switch {
	case !doCommit:
		// Without a commit the step is the move alone: one statement,
		// queued with the group's others.
		err = p.ledger.Committer().CommitQueued(ctx, func(q *ledger.Queue) ledger.FinishFunc {
			return p.queueAdvance(q, rec, steps, fresh, false)
		}, alone)
	case p.queueCommit == nil:
		err = p.ledger.Commit(ctx, alone)
	default:
		// Queued: the set with its outbox row in the group's first round
		// trip, the move that names it in the second, the delivery job in
		// the group's one insert of them. A version committed first goes
		// back to alone, which converges.
		err = p.ledger.Committer().CommitQueued(ctx, func(q *ledger.Queue) ledger.FinishFunc {
			committed, duplicate = false, false
			set := p.queueCommit(q, client, validated, actions, validations)
			return func(ctx context.Context, tx pgx.Tx, batchErr error) error {
				step, err := set(ctx, tx, batchErr)
				if err != nil {
					return err
				}
				q.Then(func(q *ledger.Queue) ledger.FinishFunc {
					move := p.queueAdvance(q, rec, append(slices.Clip(steps), step), fresh, true)
					return func(ctx context.Context, tx pgx.Tx, batchErr error) error {
						if err := move(ctx, tx, batchErr); err != nil {
							return err
						}
						committed = true
						if fresh != nil {
							faultPoint("before_transcript_commit")
						}
						return nil
					}
				})
				return nil
			}
		}, alone)
	}
	if err != nil {
		return err
	}
	if fresh != nil {
		secs := fresh.DurationSeconds
		if secs <= 0 {
			secs = rec.AudioDuration.Seconds()
		}
		p.metrics.BillableAudio(s.prov.Name(), rec.TenantID, secs)
	}
	if extractErr != nil {
		return extractErr
	}
	if !committed {
		return nil
	}
	if duplicate {
		s.log.Info("commit converged on another worker's action set")
	} else {
		p.metrics.Committed(rec.TenantID, string(rec.Lane), rec.Attempt, p.cfg.Clock.Now().Sub(rec.CreatedAt))
	}
	faultPoint("between_commit_and_delivery")
	return nil
}

// finishSteps are the moves of rec that a finish applies before its
// commit (none, or submitted → transcribed and on to validated or
// failed), how many validations they append (0 or 1), and whether the
// step commits the actions (commit, and the transcript valid).
func finishSteps(rec ledger.Recording, fresh *freshTranscript, check validation, commit bool) ([]ledger.Transition, int, bool) {
	var steps []ledger.Transition
	state := rec.State
	if fresh != nil {
		steps = append(steps, ledger.Transition{From: ledger.StateSubmitted, To: ledger.StateTranscribed,
			Reason: "transcript received", ResponseClass: fresh.responseClass, ProviderID: nonEmpty(fresh.ProviderID), Detail: fresh.detail})
		state = ledger.StateTranscribed
	}
	validations := 0
	if state == ledger.StateTranscribed {
		if check.err != nil {
			steps = append(steps, ledger.Transition{From: state, To: ledger.StateFailed,
				Reason: check.err.Error(), ResponseClass: check.class, Detail: check.detail})
			return steps, 0, false
		}
		steps = append(steps, ledger.Transition{From: state, To: ledger.StateValidated, Reason: "transcript valid", Detail: check.detail})
		validations = 1
	}
	return steps, validations, commit
}

// queueAdvance is advance as a queued step's statement: its finish
// reports what the move did. A move that lost its compare-and-set wrote
// nothing, unless wrote says the step wrote before it (its action set):
// then the step's group is written again alone.
func (p *Pipeline) queueAdvance(q *ledger.Queue, rec ledger.Recording, steps []ledger.Transition, fresh *freshTranscript, wrote bool) ledger.FinishFunc {
	if len(steps) == 0 {
		return func(context.Context, pgx.Tx, error) error { return nil }
	}
	a := ledger.Advance{RecordingID: rec.ID, Steps: steps}
	if fresh != nil {
		a.Transcript = &fresh.Transcript
	}
	move := p.ledger.QueueAdvance(q, a)
	return func(ctx context.Context, tx pgx.Tx, batchErr error) error {
		_, err := move(ctx, tx, batchErr)
		if wrote {
			return err
		}
		return ledger.KeptUsable(tx, err)
	}
}

// advance applies steps (none: nothing to do) to rec in tx, storing
// fresh's transcript with them.
func (p *Pipeline) advance(ctx context.Context, tx pgx.Tx, rec ledger.Recording, steps []ledger.Transition, fresh *freshTranscript) error {
	if len(steps) == 0 {
		return nil
	}
	a := ledger.Advance{RecordingID: rec.ID, Steps: steps}
	if fresh != nil {
		a.Transcript = &fresh.Transcript
	}
	_, err := p.ledger.AdvanceTx(ctx, tx, a)
	return err
}

// freshTranscript is a transcript the vendor has just returned, not yet
// stored, with the class of the answer that carried it.
type freshTranscript struct {
	ledger.Transcript
	responseClass string
	// detail, when set, is the submitted → transcribed event's detail (a
	// batch item's manifest).
	detail map[string]any
}

// transcriptOf returns fresh, or the recording's stored transcript.
func (p *Pipeline) transcriptOf(ctx context.Context, rec ledger.Recording, fresh *freshTranscript) (ledger.Transcript, error) {
	if fresh != nil {
		return fresh.Transcript, nil
	}
	return p.ledger.Transcript(ctx, rec.ID)
}

// validation is what check found: err (with its response class) when the
// transcript fails a rule; detail for the event either way.
type validation struct {
	err    error
	class  string
	detail map[string]any
}

// check applies the tenant's transcript rules to tr.
func (p *Pipeline) check(s *stepCtx, tr ledger.Transcript) validation {
	var v validation
	if s.rec.AudioDuration == 0 {
		v.detail = map[string]any{"audio_duration": "unknown: duration check skipped"}
		s.log.Info("audio duration unknown; validating without the duration check")
	}
	t := s.tenant
	v.err = crm.Validate(crm.Transcript{Text: tr.Text, Language: tr.Language, Confidence: tr.Confidence, DurationSeconds: tr.DurationSeconds},
		crm.Rules{MinConfidence: t.minConfidence(), Languages: t.Languages, AudioDuration: s.rec.AudioDuration,
			DurationTolerance: p.cfg.durationTolerance(), DurationSlack: p.cfg.DurationSlack})
	if v.err != nil {
		v.class = "validation"
		var ve *crm.ValidationError
		if errors.As(v.err, &ve) {
			v.class = "validation_" + ve.Check
		}
	}
	return v
}

// location returns a tenant's time zone (nil: none configured), loaded
// once per process.
func (p *Pipeline) location(tenant, tz string) (*time.Location, error) {
	if tz == "" {
		return nil, nil
	}
	if loc, ok := p.zones.Load(tz); ok {
		return loc.(*time.Location), nil
	}
	// Config.Validate checked the name; a failure here is the system's
	// time zone database going missing.
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("tenant %s time zone: %w", tenant, err)
	}
	p.zones.Store(tz, loc)
	return loc, nil
}

// extract finds the actions of a recording's transcript.
func (p *Pipeline) extract(ctx context.Context, s *stepCtx, tr ledger.Transcript) ([]crm.Action, error) {
	rec := s.rec
	loc, err := p.location(rec.TenantID, s.tenant.TimeZone)
	if err != nil {
		return nil, err
	}
	actions, err := p.extractor.Extract(ctx, crm.ExtractInput{TenantID: rec.TenantID, CallID: rec.CallID, Text: tr.Text,
		StartedAt: rec.StartedAt, Location: loc})
	if err != nil {
		return nil, fmt.Errorf("extracting actions of %s: %w", rec.CallID, err)
	}
	return actions, nil
}
