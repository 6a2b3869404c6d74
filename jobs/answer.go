package jobs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// answer is a speech vendor's answer to one request of a step.
type answer struct {
	resp stt.Response
	// op is the request: "submit", "poll" or "reconcile".
	op string
	// probe: the request was its scope's probe after a cooldown.
	probe bool
}

// handle applies a vendor's answer: exactly the table of stt-http/v1. It
// never sends another request: an answer that calls for a resubmission
// returns it as the outcome, for drive to take as the next step.
func (p *Pipeline) handle(ctx context.Context, s *stepCtx, a answer) (outcome, error) {
	resp := a.resp
	log := s.log.With(slog.String("op", a.op), slog.String("class", resp.Class), slog.Int("status", resp.HTTPStatus))
	realAnswer := resp.Outcome != stt.OutcomeThrottled && resp.Outcome != stt.OutcomeTransient
	if a.probe && realAnswer {
		if err := p.ledger.ScopeProbeSucceeded(ctx, s.tenant.Scope, s.jobID); err != nil {
			return next, err
		}
	}
	if resp.Outcome != stt.OutcomeThrottled {
		p.settle(ctx, s, a) // free the slots first: the answer is in
	}
	switch resp.Outcome {
	case stt.OutcomeCompleted:
		return done, p.transcribed(ctx, s, resp)
	case stt.OutcomePending:
		return p.pending(ctx, s, a)
	case stt.OutcomeThrottled:
		// The scope's deadline is recorded before the slot is given
		// back, so whoever gets the slot sees the cooldown.
		err := p.throttled(ctx, s, resp, log)
		p.settle(ctx, s, a)
		return next, err
	case stt.OutcomeQuotaExhausted:
		p.metrics.VendorFailed(s.prov.Name(), string(resp.Outcome))
		return next, p.quotaExhausted(ctx, s, resp, log)
	case stt.OutcomePermanent:
		p.metrics.VendorFailed(s.prov.Name(), string(resp.Outcome))
		_, err := p.move(ctx, s.rec, ledger.StateFailed, fmt.Sprintf("vendor refused it (%s, HTTP %d): %s", resp.Class, resp.HTTPStatus, resp.Message),
			func(tr *ledger.Transition) { tr.ResponseClass, tr.Detail = resp.Class, s.answerDetail(nil) })
		return done, err
	case stt.OutcomeNotFound:
		// A poll or reconcile answer outside the cases resume handles.
		return resubmitting("the vendor does not know the transcription"), nil
	}
	p.metrics.VendorFailed(s.prov.Name(), string(stt.OutcomeTransient))
	return next, p.transient(ctx, s, resp, log)
}

// transcribed: submitted -> transcribed with the transcript, and on to
// committed, in one transaction (finish).
func (p *Pipeline) transcribed(ctx context.Context, s *stepCtx, resp stt.Response) error {
	return p.transcribedWith(ctx, s, resp, s.answerDetail(nil))
}

// transcribedWith is transcribed with detail on the submitted →
// transcribed event.
func (p *Pipeline) transcribedWith(ctx context.Context, s *stepCtx, resp stt.Response, detail map[string]any) error {
	tr := resp.Transcript
	if tr == nil {
		tr = &stt.Transcript{}
	}
	segs := make([]ledger.Segment, len(tr.Segments))
	for i, seg := range tr.Segments {
		segs[i] = ledger.Segment{Start: seg.Start, End: seg.End, Text: seg.Text, Confidence: seg.Confidence}
	}
	pid := resp.ProviderID
	if pid == "" {
		pid = tr.ProviderID
	}
	return p.finish(ctx, s, &freshTranscript{responseClass: resp.Class, detail: detail, Transcript: ledger.Transcript{Provider: s.prov.Name(),
		ProviderID: pid, Text: tr.Text, Language: tr.Language, Confidence: tr.Confidence, DurationSeconds: tr.DurationSeconds, Segments: segs}})
}

// pending: the vendor accepted the work; poll it after PollAfter (when the
// answer says) or the configured interval.
func (p *Pipeline) pending(ctx context.Context, s *stepCtx, a answer) (outcome, error) {
	resp := a.resp
	wait := p.cfg.PollInterval
	if resp.PollAfter != nil {
		d := p.cfg.RetryAfter.Decide(*resp.PollAfter, true, 0)
		if d.Source == retryafter.SourceRetryAfter {
			wait = d.Delay
		}
	}
	if resp.ProviderID != "" && resp.ProviderID != s.rec.ProviderID || a.op == "submit" {
		if _, err := p.ledger.Note(ctx, ledger.Note{RecordingID: s.rec.ID, State: ledger.StateSubmitted, Reason: "accepted: polling",
			ResponseClass: resp.Class, RetryAfter: resp.PollAfter, ProviderID: nonEmpty(resp.ProviderID), Detail: s.answerDetail(nil)}); err != nil {
			return next, err
		}
	}
	return snoozeFor(wait), nil
}

// throttleSignal is the timing signal of a speech vendor's throttled answer
// to the step's request: the one place jobs builds a ledger.ThrottleSignal.
func throttleSignal(s *stepCtx, resp stt.Response) ledger.ThrottleSignal {
	return ledger.ThrottleSignal{
		Scope: s.tenant.Scope, Class: resp.Class, RetryAfter: resp.RetryAfter, Date: resp.Date,
		VendorDelay: resp.VendorDelay, VendorDelayHeader: resp.VendorDelayHeader, VendorDelayRaw: resp.VendorDelayRaw,
		Attempt: s.rec.Attempt - 1, JobID: s.jobID, RecordingID: s.rec.ID,
	}
}

// throttled: the scope's deadline moves (or, observe-only, the offer is
// recorded and the recording backs off alone); submitted -> retry_wait.
func (p *Pipeline) throttled(ctx context.Context, s *stepCtx, resp stt.Response, log *slog.Logger) error {
	scope := s.tenant.Scope
	res, err := p.ledger.ScopeDeferralFromSignal(ctx, ledger.ThrottlePolicy{RetryAfter: p.cfg.RetryAfter, ObserveOnly: s.observeOnly},
		throttleSignal(s, resp))
	if err != nil {
		return err
	}
	p.metrics.VendorThrottled(s.prov.Name(), scope, resp.HTTPStatus)
	notBefore := res.NotBefore
	if res.Scope.Moved {
		p.metrics.VendorCooldown(scope, notBefore.Sub(p.cfg.Clock.Now()))
	}
	if !s.observeOnly && notBefore.After(p.cfg.Clock.Now()) {
		p.cooldown(ctx, s, fmt.Sprintf("HTTP %d %s", resp.HTTPStatus, resp.Class))
	}
	log.Info("vendor throttled; scope deferred", slog.Time("not_before", notBefore), slog.Any("decision", res.Decision))
	_, err = p.move(ctx, s.rec, ledger.StateRetryWait, "throttled: "+resp.Class, func(tr *ledger.Transition) {
		tr.ResponseClass, tr.RetryAfter, tr.NotBefore = resp.Class, res.Extension.RetryAfter, &notBefore
		tr.Detail = s.answerDetail(map[string]any{"scope": scope, "decision": res.Decision.String(), "status": resp.HTTPStatus})
	})
	return err
}

// quotaExhausted: the scope pauses until an operator resumes it; the
// recording waits in retry_wait and then in admission.
func (p *Pipeline) quotaExhausted(ctx context.Context, s *stepCtx, resp stt.Response, log *slog.Logger) error {
	if err := p.ledger.ScopePause(ctx, s.tenant.Scope, resp.Class+": "+resp.Message); err != nil {
		return err
	}
	log.Warn("vendor quota exhausted: scope paused until an operator resumes it (callscribe scopes resume)")
	now := p.cfg.Clock.Now()
	_, err := p.move(ctx, s.rec, ledger.StateRetryWait, "quota exhausted: scope paused until an operator resumes it", func(tr *ledger.Transition) {
		tr.ResponseClass, tr.NotBefore, tr.Detail = resp.Class, &now, s.answerDetail(nil)
	})
	return err
}

// transient: this recording backs off alone (the scope is not throttled).
func (p *Pipeline) transient(ctx context.Context, s *stepCtx, resp stt.Response, log *slog.Logger) error {
	d := p.cfg.RetryAfter.Decide("", false, s.rec.Attempt-1)
	nb := d.NotBefore
	log.Info("transient vendor failure; backing off", slog.Duration("delay", d.Delay))
	_, err := p.move(ctx, s.rec, ledger.StateRetryWait, "transient: "+resp.Class, func(tr *ledger.Transition) {
		tr.ResponseClass, tr.NotBefore = resp.Class, &nb
		tr.Detail = s.answerDetail(map[string]any{"status": resp.HTTPStatus, "backoff": d.Delay.String()})
	})
	return err
}
