package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// maxSteps bounds the state changes one Work call makes before it yields.
const maxSteps = 12

// HeaderAdmittedAt is sent with every submission: when the worker decided
// to send it. A server can tell requests already in flight when it
// announced a cooldown from requests sent after (stt-http simulators do).
const HeaderAdmittedAt = "X-Admitted-At"

// outcome of one step: go on with the next state, or stop this Work call.
type outcome struct {
	done   bool          // nothing more to do (terminal, validated, or handed on)
	snooze time.Duration // > 0 or forceSnooze: come back after it
	force  bool
}

var next = outcome{}

func snoozeFor(d time.Duration) outcome {
	if d < 0 {
		d = 0
	}
	return outcome{snooze: d, force: true}
}

// drive is the resumable step function: it reads the recording and does the
// next step from whatever state it finds, until the recording is done or it
// must wait. It never holds a transaction or connection across a vendor call.
func (p *Pipeline) drive(ctx context.Context, jobID int64, id uuid.UUID) error {
	for range maxSteps {
		rec, err := p.ledger.Recording(ctx, id)
		if errors.Is(err, ledger.ErrNotFound) {
			return river.JobCancel(fmt.Errorf("recording %s no longer exists (purged?): %w", id, err))
		}
		if err != nil {
			return err
		}
		if rec.State.Terminal() || (rec.State == ledger.StateValidated && p.commitActions == nil) {
			return nil
		}
		now := p.cfg.Clock.Now()
		if !rec.Deadline.IsZero() && !now.Before(rec.Deadline) {
			return p.expire(ctx, rec, "deadline passed")
		}
		o, err := p.step(ctx, jobID, rec)
		if errors.Is(err, ledger.ErrStateConflict) {
			continue // another worker moved it; read again
		}
		if err != nil {
			return err
		}
		if o.done {
			return nil
		}
		if o.force {
			// Never sleep past the deadline: wake to expire it.
			if !rec.Deadline.IsZero() {
				if left := rec.Deadline.Sub(now); o.snooze > left {
					o.snooze = left + 10*time.Millisecond
				}
			}
			return river.JobSnooze(o.snooze)
		}
	}
	return river.JobSnooze(0)
}

func (p *Pipeline) step(ctx context.Context, jobID int64, rec ledger.Recording) (outcome, error) {
	switch rec.State {
	case ledger.StateReceived:
		_, err := p.move(ctx, rec, ledger.StateEligible, "ready for admission", nil)
		return next, err
	case ledger.StateRetryWait:
		if wait := rec.NotBefore.Sub(p.cfg.Clock.Now()); wait > 0 {
			return snoozeFor(wait), nil
		}
		_, err := p.move(ctx, rec, ledger.StateEligible, "retry wait over", nil)
		return next, err
	case ledger.StateEligible:
		return p.admitAndSubmit(ctx, jobID, rec)
	case ledger.StateSubmitted:
		return p.resume(ctx, jobID, rec)
	case ledger.StateTranscribed:
		return next, p.validate(ctx, rec)
	case ledger.StateValidated:
		return outcome{done: true}, p.commit(ctx, rec)
	}
	return outcome{done: true}, nil
}

func (p *Pipeline) move(ctx context.Context, rec ledger.Recording, to ledger.State, reason string, edit func(*ledger.Transition)) (ledger.Recording, error) {
	t := ledger.Transition{RecordingID: rec.ID, From: rec.State, To: to, Reason: reason}
	if edit != nil {
		edit(&t)
	}
	return p.ledger.Transition(ctx, t)
}

func (p *Pipeline) expire(ctx context.Context, rec ledger.Recording, reason string) error {
	_, err := p.move(ctx, rec, ledger.StateExpired, reason, func(t *ledger.Transition) {
		t.Detail = map[string]any{"deadline": rec.Deadline.Format(time.RFC3339Nano), "state": string(rec.State)}
	})
	if errors.Is(err, ledger.ErrStateConflict) {
		return nil // moved on meanwhile; the next read decides
	}
	if err == nil {
		p.log.Info("recording expired", slog.String("recording", rec.ID.String()), slog.String("from", string(rec.State)))
	}
	return err
}

func (p *Pipeline) tenant(rec ledger.Recording) (TenantConfig, stt.Provider, error) {
	t, ok := p.cfg.Tenants[rec.TenantID]
	prov := p.providers[rec.TenantID]
	if !ok || prov == nil {
		return TenantConfig{}, nil, fmt.Errorf("tenant %q is not configured", rec.TenantID)
	}
	return t, prov, nil
}

func (p *Pipeline) observeOnly(scope string) bool {
	for _, s := range p.cfg.ObserveOnlyScopes {
		if s == scope {
			return true
		}
	}
	return false
}

// admission asks the ledger whether this job may send to the scope now.
func (p *Pipeline) admission(ctx context.Context, jobID int64, scope string) (ledger.Admission, outcome, error) {
	if p.observeOnly(scope) {
		return ledger.Admission{Verdict: ledger.VerdictAdmit}, next, nil
	}
	a, err := p.ledger.ScopeAdmit(ctx, scope, jobID, p.cfg.ProbeTimeout, p.cfg.ProbeWait)
	if err != nil {
		return a, next, err
	}
	now := p.cfg.Clock.Now()
	switch a.Verdict {
	case ledger.VerdictDeferred:
		// Spread the wake-ups a little so a reopened scope sees its probe first.
		return a, snoozeFor(a.Until.Sub(now) + time.Duration(rand.Int64N(int64(250*time.Millisecond)))), nil
	case ledger.VerdictProbeOut:
		return a, snoozeFor(a.Until.Sub(now) + time.Duration(rand.Int64N(int64(p.cfg.ProbeWait)+1))), nil
	case ledger.VerdictPaused:
		return a, snoozeFor(p.cfg.PausedRecheck), nil
	}
	return a, next, nil
}

// admitAndSubmit: eligible -> submitted after the deadline and the scope
// say yes, then the submission itself.
func (p *Pipeline) admitAndSubmit(ctx context.Context, jobID int64, rec ledger.Recording) (outcome, error) {
	t, prov, err := p.tenant(rec)
	if err != nil {
		_, err = p.move(ctx, rec, ledger.StateFailed, err.Error()+": add it to pipeline.tenants", func(t *ledger.Transition) { t.ResponseClass = "config" })
		return outcome{done: true}, err
	}
	if rec.Attempt >= p.cfg.MaxSubmissions {
		_, err := p.move(ctx, rec, ledger.StateFailed, fmt.Sprintf("gave up after %d submissions", rec.Attempt), func(t *ledger.Transition) { t.ResponseClass = "max_submissions" })
		return outcome{done: true}, err
	}
	// Stamped before asking: a deferral recorded before this instant is
	// visible to the admission check below.
	admittedAt := p.cfg.Clock.Now()
	a, o, err := p.admission(ctx, jobID, t.Scope)
	if err != nil || o.force {
		return o, err
	}
	release, o := p.takeSlot(ctx, prov.Name(), rec.ID.String())
	if o.force {
		return o, nil
	}
	defer release()
	name := prov.Name()
	rec, err = p.move(ctx, rec, ledger.StateSubmitted, "admitted", func(tr *ledger.Transition) {
		tr.Provider = &name
		tr.Detail = map[string]any{"scope": t.Scope, "probe": a.Verdict == ledger.VerdictProbe}
	})
	if err != nil {
		return next, err
	}
	return p.submit(ctx, jobID, rec, t, prov, a.Verdict == ledger.VerdictProbe, admittedAt)
}

// resume handles a recording found in submitted: poll what the vendor
// accepted, or ask it by key whether it saw the submission, and submit again
// only if it never did.
func (p *Pipeline) resume(ctx context.Context, jobID int64, rec ledger.Recording) (outcome, error) {
	t, prov, err := p.tenant(rec)
	if err != nil {
		_, err = p.move(ctx, rec, ledger.StateFailed, err.Error(), nil)
		return outcome{done: true}, err
	}
	caps := prov.Capabilities()
	switch {
	case rec.ProviderID != "" && caps.Async:
		resp, err := prov.Poll(ctx, rec.ProviderID)
		if err != nil {
			return next, fmt.Errorf("polling %s: %w", prov.Name(), err)
		}
		if resp.Outcome == stt.OutcomeNotFound {
			return p.resubmit(ctx, jobID, rec, t, prov, "the vendor no longer knows its transcription id")
		}
		return p.handle(ctx, jobID, rec, t, prov, resp, false, "poll")
	case caps.Reconcile:
		resp, err := prov.Reconcile(ctx, rec.BusinessKey)
		if err != nil {
			return next, fmt.Errorf("reconciling with %s: %w", prov.Name(), err)
		}
		if resp.Outcome == stt.OutcomeNotFound {
			return p.resubmit(ctx, jobID, rec, t, prov, "reconciled: the vendor never saw the submission")
		}
		if _, err := p.ledger.Note(ctx, ledger.Note{RecordingID: rec.ID, State: rec.State, Reason: "reconciled: the vendor had the submission",
			ResponseClass: resp.Class, ProviderID: nonEmpty(resp.ProviderID)}); err != nil {
			return next, err
		}
		return p.handle(ctx, jobID, rec, t, prov, resp, false, "reconcile")
	default:
		return p.resubmit(ctx, jobID, rec, t, prov, "resubmitting: the vendor cannot be asked whether it saw the earlier submission")
	}
}

func (p *Pipeline) resubmit(ctx context.Context, jobID int64, rec ledger.Recording, t TenantConfig, prov stt.Provider, why string) (outcome, error) {
	if rec.Attempt >= p.cfg.MaxSubmissions {
		_, err := p.move(ctx, rec, ledger.StateFailed, fmt.Sprintf("gave up after %d submissions", rec.Attempt), func(t *ledger.Transition) { t.ResponseClass = "max_submissions" })
		return outcome{done: true}, err
	}
	admittedAt := p.cfg.Clock.Now()
	a, o, err := p.admission(ctx, jobID, t.Scope)
	if err != nil || o.force {
		return o, err
	}
	release, o := p.takeSlot(ctx, prov.Name(), rec.ID.String())
	if o.force {
		return o, nil
	}
	defer release()
	rec, err = p.ledger.Note(ctx, ledger.Note{RecordingID: rec.ID, State: ledger.StateSubmitted, Reason: why, Submission: true,
		Detail: map[string]any{"scope": t.Scope, "probe": a.Verdict == ledger.VerdictProbe}})
	if err != nil {
		return next, err
	}
	return p.submit(ctx, jobID, rec, t, prov, a.Verdict == ledger.VerdictProbe, admittedAt)
}

// submit sends the recording to the vendor, holding nothing while it waits.
func (p *Pipeline) submit(ctx context.Context, jobID int64, rec ledger.Recording, t TenantConfig, prov stt.Provider, probe bool, admittedAt time.Time) (outcome, error) {
	url, err := p.audio.URL(ctx, rec.AudioURI, p.cfg.AudioURLTTL)
	if err != nil {
		return p.audioProblem(ctx, rec, err)
	}
	model := rec.Model
	if model == "" {
		model = t.Model
	}
	req := stt.Request{
		IdempotencyKey: rec.BusinessKey, TenantID: rec.TenantID, CallID: rec.CallID, AudioSHA256: rec.AudioSHA256,
		AudioURL: url, AudioName: path.Base(rec.AudioURI), AudioBytes: rec.AudioBytes, Model: model, Language: rec.Language,
		RequestID: fmt.Sprintf("%s-%d", rec.ID, rec.Attempt),
		OpenAudio: func(ctx context.Context) (io.ReadCloser, error) { return p.audio.Open(ctx, rec.AudioURI) },
		Header:    http.Header{HeaderAdmittedAt: []string{admittedAt.UTC().Format(time.RFC3339Nano)}},
	}
	resp, err := prov.Submit(ctx, req)
	if err == nil && (resp.Outcome == stt.OutcomeCompleted || resp.Outcome == stt.OutcomePending) {
		faultPoint("after_stt_accepted")
	}
	if err != nil {
		if errors.Is(err, stt.ErrAudioUnreadable) {
			return p.audioProblem(ctx, rec, err)
		}
		return next, fmt.Errorf("submitting to %s: %w", prov.Name(), err)
	}
	return p.handle(ctx, jobID, rec, t, prov, resp, probe, "submit")
}

func (p *Pipeline) audioProblem(ctx context.Context, rec ledger.Recording, err error) (outcome, error) {
	reason := "audio cannot be read: " + err.Error()
	if errors.Is(err, audio.ErrTooLarge) {
		reason = "audio too large: " + err.Error()
	}
	_, merr := p.move(ctx, rec, ledger.StateFailed, reason, func(t *ledger.Transition) { t.ResponseClass = "audio" })
	return outcome{done: true}, merr
}

// handle applies a vendor's answer: exactly the table of stt-http/v1.
func (p *Pipeline) handle(ctx context.Context, jobID int64, rec ledger.Recording, t TenantConfig, prov stt.Provider, resp stt.Response, probe bool, op string) (outcome, error) {
	log := p.log.With(slog.String("recording", rec.ID.String()), slog.String("op", op), slog.String("class", resp.Class), slog.Int("status", resp.HTTPStatus))
	realAnswer := resp.Outcome != stt.OutcomeThrottled && resp.Outcome != stt.OutcomeTransient
	if probe && realAnswer {
		if err := p.ledger.ScopeProbeSucceeded(ctx, t.Scope, jobID); err != nil {
			return next, err
		}
	}
	switch resp.Outcome {
	case stt.OutcomeCompleted:
		tr := resp.Transcript
		if tr == nil {
			tr = &stt.Transcript{}
		}
		segs := make([]ledger.Segment, len(tr.Segments))
		for i, s := range tr.Segments {
			segs[i] = ledger.Segment{Start: s.Start, End: s.End, Text: s.Text, Confidence: s.Confidence}
		}
		pid := resp.ProviderID
		if pid == "" {
			pid = tr.ProviderID
		}
		_, err := p.ledger.RecordTranscript(ctx,
			ledger.Transition{RecordingID: rec.ID, From: ledger.StateSubmitted, To: ledger.StateTranscribed, Reason: "transcript received",
				ResponseClass: resp.Class, ProviderID: nonEmpty(pid)},
			ledger.Transcript{Provider: prov.Name(), ProviderID: pid, Text: tr.Text, Language: tr.Language, Confidence: tr.Confidence,
				DurationSeconds: tr.DurationSeconds, Segments: segs})
		if err == nil {
			faultPoint("after_transcript_persisted")
		}
		return next, err

	case stt.OutcomePending:
		wait := p.cfg.PollInterval
		if resp.PollAfter != nil {
			d := p.cfg.RetryAfter.Decide(*resp.PollAfter, true, 0)
			if d.Source == retryafter.SourceRetryAfter {
				wait = d.Delay
			}
		}
		if resp.ProviderID != "" && resp.ProviderID != rec.ProviderID || op == "submit" {
			if _, err := p.ledger.Note(ctx, ledger.Note{RecordingID: rec.ID, State: ledger.StateSubmitted, Reason: "accepted: polling",
				ResponseClass: resp.Class, RetryAfter: resp.PollAfter, ProviderID: nonEmpty(resp.ProviderID)}); err != nil {
				return next, err
			}
		}
		return snoozeFor(wait), nil

	case stt.OutcomeThrottled:
		var d retryafter.Decision
		if resp.VendorDelay != nil {
			d = p.cfg.RetryAfter.DecideDelay(*resp.VendorDelay, resp.VendorDelayRaw, rec.Attempt-1)
		} else {
			raw := ""
			if resp.RetryAfter != nil {
				raw = *resp.RetryAfter
			}
			d = p.cfg.RetryAfter.Decide(raw, resp.RetryAfter != nil, rec.Attempt-1)
		}
		ext := ledger.DecisionExtension(t.Scope, d)
		ext.JobID, ext.RecordingID = jobID, rec.ID
		if resp.RetryAfter == nil && resp.VendorDelayHeader != "" {
			raw := resp.VendorDelayHeader + ": " + resp.VendorDelayRaw
			ext.RetryAfter = &raw
		}
		var notBefore time.Time
		if p.observeOnly(t.Scope) {
			ext.Reason = "observe-only: " + ext.Reason
			if err := p.ledger.ScopeDeferralObserve(ctx, ext); err != nil {
				return next, err
			}
			// As if no shared deferral existed: this recording alone backs off.
			notBefore = p.cfg.RetryAfter.Decide("", false, rec.Attempt-1).NotBefore
		} else {
			res, err := p.ledger.ScopeDeferralExtend(ctx, ext)
			if err != nil {
				return next, err
			}
			notBefore = res.NotBefore
		}
		log.Info("vendor throttled; scope deferred", slog.String("scope", t.Scope), slog.Time("not_before", notBefore), slog.Any("decision", d))
		_, err := p.move(ctx, rec, ledger.StateRetryWait, "throttled: "+resp.Class, func(tr *ledger.Transition) {
			tr.ResponseClass, tr.RetryAfter, tr.NotBefore = resp.Class, ext.RetryAfter, &notBefore
			tr.Detail = map[string]any{"scope": t.Scope, "decision": d.String(), "status": resp.HTTPStatus}
		})
		return next, err

	case stt.OutcomeQuotaExhausted:
		if err := p.ledger.ScopePause(ctx, t.Scope, resp.Class+": "+resp.Message); err != nil {
			return next, err
		}
		log.Warn("vendor quota exhausted: scope paused until an operator resumes it (callscribe scopes resume)", slog.String("scope", t.Scope))
		now := p.cfg.Clock.Now()
		_, err := p.move(ctx, rec, ledger.StateRetryWait, "quota exhausted: scope paused until an operator resumes it", func(tr *ledger.Transition) {
			tr.ResponseClass, tr.NotBefore = resp.Class, &now
		})
		return next, err

	case stt.OutcomePermanent:
		_, err := p.move(ctx, rec, ledger.StateFailed, fmt.Sprintf("vendor refused it (%s, HTTP %d): %s", resp.Class, resp.HTTPStatus, resp.Message),
			func(tr *ledger.Transition) { tr.ResponseClass = resp.Class })
		return outcome{done: true}, err

	case stt.OutcomeNotFound:
		// A poll or reconcile answer outside the cases resume handles.
		return p.resubmit(ctx, jobID, rec, t, prov, "the vendor does not know the transcription")
	}

	// Transient: this recording backs off alone (the scope is not throttled).
	d := p.cfg.RetryAfter.Decide("", false, rec.Attempt-1)
	nb := d.NotBefore
	log.Info("transient vendor failure; backing off", slog.Duration("delay", d.Delay))
	_, err := p.move(ctx, rec, ledger.StateRetryWait, "transient: "+resp.Class, func(tr *ledger.Transition) {
		tr.ResponseClass, tr.NotBefore = resp.Class, &nb
		tr.Detail = map[string]any{"status": resp.HTTPStatus, "backoff": d.Delay.String()}
	})
	return next, err
}

// validate: transcribed -> validated, or failed with a reason a person can act on.
func (p *Pipeline) validate(ctx context.Context, rec ledger.Recording) error {
	t, _, err := p.tenant(rec)
	if err != nil {
		_, err = p.move(ctx, rec, ledger.StateFailed, err.Error(), nil)
		return err
	}
	tr, err := p.ledger.Transcript(ctx, rec.ID)
	if err != nil {
		return err
	}
	var dur time.Duration
	if info, err := p.audio.Inspect(ctx, rec.AudioURI); err == nil {
		dur = info.Duration
	}
	verr := crm.Validate(crm.Transcript{Text: tr.Text, Language: tr.Language, Confidence: tr.Confidence, DurationSeconds: tr.DurationSeconds},
		crm.Rules{MinConfidence: t.MinConfidence, Languages: t.Languages, AudioDuration: dur,
			DurationTolerance: p.cfg.DurationTolerance, DurationSlack: p.cfg.DurationSlack})
	if verr != nil {
		var ve *crm.ValidationError
		class := "validation"
		if errors.As(verr, &ve) {
			class = "validation_" + ve.Check
		}
		_, err := p.move(ctx, rec, ledger.StateFailed, verr.Error(), func(tr *ledger.Transition) { tr.ResponseClass = class })
		return err
	}
	_, err = p.move(ctx, rec, ledger.StateValidated, "transcript valid", nil)
	return err
}

// Sweep expires every unfinished recording whose deadline has passed, and
// returns how many it expired.
func (p *Pipeline) Sweep(ctx context.Context) (int, error) {
	n := 0
	for {
		ids, err := p.ledger.Overdue(ctx, p.cfg.Clock.Now(), 500)
		if err != nil {
			return n, err
		}
		moved := 0
		for _, id := range ids {
			rec, err := p.ledger.Recording(ctx, id)
			if err != nil {
				continue
			}
			if err := p.expire(ctx, rec, "deadline passed (sweep)"); err != nil {
				return n, err
			}
			moved++
		}
		n += moved
		if len(ids) < 500 || moved == 0 {
			return n, nil
		}
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// commit: validated -> committed. The actions are extracted from the
// transcript and committed with their outbox row and delivery job in one
// transaction (outbox.Commit). Work that already has a transcript goes on
// during a vendor cooldown: nothing here asks the speech vendor's scope.
func (p *Pipeline) commit(ctx context.Context, rec ledger.Recording) error {
	tr, err := p.ledger.Transcript(ctx, rec.ID)
	if err != nil {
		return err
	}
	t := p.cfg.Tenants[rec.TenantID]
	var loc *time.Location
	if t.TimeZone != "" {
		loc, _ = time.LoadLocation(t.TimeZone)
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
		p.log.Info("commit converged on another worker's action set", slog.String("recording", rec.ID.String()))
	}
	faultPoint("between_commit_and_delivery")
	return nil
}
