package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// admitAndSubmit: eligible -> submitted once the scope and the vendor's
// capacity let the recording through, then the submission itself.
func (p *Pipeline) admitAndSubmit(ctx context.Context, s *stepCtx) (outcome, error) {
	return p.send(ctx, s, func(probe bool, admittedAt time.Time) (ledger.Recording, error) {
		name := s.prov.Name()
		return p.move(ctx, s.rec, ledger.StateSubmitted, "admitted", func(tr *ledger.Transition) {
			tr.Provider = &name
			tr.Detail = submissionDetail(s, probe, admittedAt)
		})
	})
}

// resubmit submits a recording in submitted again, recording why.
func (p *Pipeline) resubmit(ctx context.Context, s *stepCtx, why string) (outcome, error) {
	return p.send(ctx, s, func(probe bool, admittedAt time.Time) (ledger.Recording, error) {
		return p.ledger.Note(ctx, ledger.Note{RecordingID: s.rec.ID, State: ledger.StateSubmitted, Reason: why, Submission: true,
			Detail: submissionDetail(s, probe, admittedAt)})
	})
}

// send is every submission: give up after MaxSubmissions; ask the scope
// (wait in line while it is deferred or paused), its window (wait in line
// while it is full) and the vendor's capacity (snooze without a slot);
// record the submission with record (probe: this request is the scope's
// probe); submit. The answer settles the slots (settle).
func (p *Pipeline) send(ctx context.Context, s *stepCtx, record func(probe bool, admittedAt time.Time) (ledger.Recording, error)) (outcome, error) {
	if s.rec.Attempt >= p.cfg.MaxSubmissions {
		_, err := p.move(ctx, s.rec, ledger.StateFailed, fmt.Sprintf("gave up after %d submissions", s.rec.Attempt),
			func(t *ledger.Transition) { t.ResponseClass = "max_submissions" })
		return done, err
	}
	admittedAt, a, err := p.admit(ctx, s)
	for waited := time.Duration(0); err == nil && !a.Admitted(); admittedAt, a, err = p.admit(ctx, s) {
		o, front := p.waitInLine(ctx, s, a)
		// At the front of the line, a short wait is spent here: through
		// River, the sleep would end in a fetch poll and a reload, which
		// after every cooldown leaves the scope idle for that long.
		d := o.snooze
		if a.Verdict == ledger.VerdictProbeOut {
			d = min(d, frontPoll*3)
		}
		if !front || waited+d > deferredWaitMax || !sleepCtx(ctx, d) {
			return o, nil
		}
		waited += d
	}
	if err != nil {
		return next, err
	}
	probe := a.Verdict == ledger.VerdictProbe
	o, waited := p.takeWindow(ctx, s, probe)
	if o.kind == stepSnooze {
		return o, nil
	}
	if waited && !probe {
		// The scope may have been deferred while this job waited for its
		// slot (the slot it got may be the throttled request's): ask again.
		if admittedAt, a, err = p.admit(ctx, s); err != nil || !a.Admitted() {
			p.release(ctx, s, capacity.Neutral, "")
			if err != nil {
				return next, err
			}
			o, _ := p.waitInLine(ctx, s, a)
			return o, nil
		}
		probe = a.Verdict == ledger.VerdictProbe
	}
	if o := p.takeSlot(ctx, s); o.kind == stepSnooze {
		p.release(ctx, s, capacity.Neutral, "")
		return o, nil
	}
	// Whatever ends this step without an answer (an error, a cancelled
	// context) gives the slots back.
	defer func() {
		if !s.held.settled {
			p.release(ctx, s, capacity.Neutral, "")
		}
	}()
	rec, err := record(probe, admittedAt)
	if err != nil {
		return next, err
	}
	s.rec = rec
	return p.submit(ctx, s, probe, admittedAt)
}

// submissionDetail is what a submission's event records: its scope,
// whether it was the probe, and when its admission was asked (the
// deadlines recorded before that instant were known to it).
func submissionDetail(s *stepCtx, probe bool, admittedAt time.Time) map[string]any {
	return map[string]any{"scope": s.tenant.Scope, "probe": probe, "admitted_at": admittedAt.UTC().Format(time.RFC3339Nano)}
}

// admit asks the ledger whether the recording's scope admits a request
// now, and returns when it asked: a deferral recorded before that instant
// is visible to the check (it is sent as X-Admitted-At).
//
// The step's first check decides from the scope's deferral read with the
// recording (stepCtx.scopeRead), asked when that read began; later checks
// read the scope again.
func (p *Pipeline) admit(ctx context.Context, s *stepCtx) (time.Time, ledger.Admission, error) {
	policy := ledger.AdmitPolicy{
		ProbeTimeout: p.cfg.ProbeTimeout, ProbeWait: p.cfg.ProbeWait, PausedRecheck: p.cfg.PausedRecheck,
		ObserveOnly: s.observeOnly, Clock: p.cfg.Clock,
	}
	if read := s.scopeRead; read != nil && read.Scope == s.tenant.Scope {
		s.scopeRead = nil
		a, err := p.ledger.ScopeAdmitWaitFrom(ctx, *read, s.jobID, policy)
		return s.readAt, a, err
	}
	at := p.cfg.Clock.Now()
	a, err := p.ledger.ScopeAdmitWait(ctx, s.tenant.Scope, s.jobID, policy)
	return at, a, err
}

// resume handles a recording found in submitted: poll what the vendor
// accepted, or ask it by key whether it saw the submission, and submit again
// only if it never did.
func (p *Pipeline) resume(ctx context.Context, s *stepCtx) (outcome, error) {
	caps := s.prov.Capabilities()
	switch {
	case s.rec.ProviderID != "" && caps.Async:
		resp, err := s.prov.Poll(ctx, s.rec.ProviderID)
		if err != nil {
			return next, fmt.Errorf("polling %s: %w", s.prov.Name(), err)
		}
		if resp.Outcome == stt.OutcomeNotFound {
			return p.resubmit(ctx, s, "the vendor no longer knows its transcription id")
		}
		return p.handle(ctx, s, answer{resp: resp, op: "poll"})
	case caps.Reconcile:
		resp, err := s.prov.Reconcile(ctx, s.rec.BusinessKey)
		if err != nil {
			return next, fmt.Errorf("reconciling with %s: %w", s.prov.Name(), err)
		}
		if resp.Outcome == stt.OutcomeNotFound {
			return p.resubmit(ctx, s, "reconciled: the vendor never saw the submission")
		}
		if _, err := p.ledger.Note(ctx, ledger.Note{RecordingID: s.rec.ID, State: s.rec.State, Reason: "reconciled: the vendor had the submission",
			ResponseClass: resp.Class, ProviderID: nonEmpty(resp.ProviderID)}); err != nil {
			return next, err
		}
		return p.handle(ctx, s, answer{resp: resp, op: "reconcile"})
	default:
		return p.resubmit(ctx, s, "resubmitting: the vendor cannot be asked whether it saw the earlier submission")
	}
}

// submit sends the recording to the vendor, holding nothing while it waits.
func (p *Pipeline) submit(ctx context.Context, s *stepCtx, probe bool, admittedAt time.Time) (outcome, error) {
	rec := s.rec
	url, err := p.audio.URL(ctx, rec.AudioURI, p.cfg.AudioURLTTL)
	if err != nil {
		return p.audioProblem(ctx, rec, err)
	}
	model := rec.Model
	if model == "" {
		model = s.tenant.Model
	}
	req := stt.Request{
		IdempotencyKey: rec.BusinessKey, TenantID: rec.TenantID, CallID: rec.CallID, AudioSHA256: rec.AudioSHA256,
		AudioURL: url, AudioName: path.Base(rec.AudioURI), AudioBytes: rec.AudioBytes, Model: model, Language: rec.Language,
		RequestID: fmt.Sprintf("%s-%d", rec.ID, rec.Attempt),
		OpenAudio: func(ctx context.Context) (io.ReadCloser, error) { return p.audio.Open(ctx, rec.AudioURI) },
		Header:    http.Header{HeaderAdmittedAt: []string{admittedAt.UTC().Format(time.RFC3339Nano)}},
	}
	resp, err := s.prov.Submit(ctx, req)
	if err == nil && (resp.Outcome == stt.OutcomeCompleted || resp.Outcome == stt.OutcomePending) {
		faultPoint("after_stt_accepted")
	}
	if err != nil {
		if errors.Is(err, stt.ErrAudioUnreadable) {
			return p.audioProblem(ctx, rec, err)
		}
		return next, fmt.Errorf("submitting to %s: %w", s.prov.Name(), err)
	}
	return p.handle(ctx, s, answer{resp: resp, op: "submit", probe: probe})
}

func (p *Pipeline) audioProblem(ctx context.Context, rec ledger.Recording, err error) (outcome, error) {
	reason := "audio cannot be read: " + err.Error()
	if errors.Is(err, audio.ErrTooLarge) {
		reason = "audio too large: " + err.Error()
	}
	_, merr := p.move(ctx, rec, ledger.StateFailed, reason, func(t *ledger.Transition) { t.ResponseClass = "audio" })
	return done, merr
}
