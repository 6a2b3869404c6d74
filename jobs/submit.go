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
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// admitAndSubmit: eligible -> submitted once the scope and the vendor's
// capacity let the recording through, then the submission itself.
func (p *Pipeline) admitAndSubmit(ctx context.Context, s *stepCtx) (outcome, error) {
	return p.send(ctx, s, func(a ledger.Admission) (ledger.Recording, error) {
		name := s.prov.Name()
		return p.move(ctx, s.rec, ledger.StateSubmitted, "admitted", func(tr *ledger.Transition) {
			tr.Provider = &name
			tr.Detail = submissionDetail(s, a)
		})
	})
}

// resubmit submits a recording in submitted again, recording why.
func (p *Pipeline) resubmit(ctx context.Context, s *stepCtx, why string) (outcome, error) {
	return p.send(ctx, s, func(a ledger.Admission) (ledger.Recording, error) {
		return p.ledger.Note(ctx, ledger.Note{RecordingID: s.rec.ID, State: ledger.StateSubmitted, Reason: why, Submission: true,
			Detail: submissionDetail(s, a)})
	})
}

// send is every submission: give up after MaxSubmissions; ask the scope
// (wait in line while it is deferred or paused), its window (wait in line
// while it is full) and the vendor's capacity (snooze without a slot);
// sign the audio URL; ask the scope again if its admission is older than
// AdmissionMaxAge; record the submission with record (with the admission
// it was sent under); submit. The answer settles the slots (settle).
func (p *Pipeline) send(ctx context.Context, s *stepCtx, record func(a ledger.Admission) (ledger.Recording, error)) (outcome, error) {
	if s.rec.Attempt >= p.cfg.MaxSubmissions {
		_, err := p.move(ctx, s.rec, ledger.StateFailed, fmt.Sprintf("gave up after %d submissions", s.rec.Attempt),
			func(t *ledger.Transition) { t.ResponseClass = "max_submissions" })
		return done, err
	}
	a, err := p.admit(ctx, s)
	for waited := time.Duration(0); err == nil && !a.Admitted(); a, err = p.admit(ctx, s) {
		o, front := p.waitInLine(ctx, s, a)
		// At the front of the line, a short wait is spent here: through
		// River, the sleep would end in a fetch poll and a reload, which
		// after every cooldown leaves the scope idle for that long.
		d := o.snooze
		if a.Verdict == ledger.VerdictProbeOut {
			d = min(d, frontPoll*3)
		}
		if !front || waited+d > deferredWaitMax || !clock.Sleep(ctx, d) {
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
		if a, err = p.admit(ctx, s); err != nil || !a.Admitted() {
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
	url, err := p.audio.URL(ctx, s.rec.AudioURI, p.cfg.AudioURLTTL)
	if err != nil {
		return p.audioProblem(ctx, s.rec, err)
	}
	// The waits above may have taken a while: the submission records an
	// admission younger than AdmissionMaxAge.
	if a, err = p.recheck(ctx, s, a, probe); err != nil || !a.Admitted() {
		if err != nil {
			return next, err
		}
		o, _ := p.waitInLine(ctx, s, a)
		return o, nil
	}
	rec, err := record(a)
	if err != nil {
		return next, err
	}
	s.rec = rec
	return p.submit(ctx, s, a, probe, url)
}

// recheck returns a when it is younger than AdmissionMaxAge, else the
// scope's answer now (ScopeRecheck: a paused or deferred scope, or one
// whose probe is another job's, refuses). A read that itself took longer
// than AdmissionMaxAge (a database slower than that) is followed by
// another, up to recheckReads; the request then goes out after the last.
func (p *Pipeline) recheck(ctx context.Context, s *stepCtx, a ledger.Admission, probe bool) (ledger.Admission, error) {
	for reads := 0; reads < recheckReads && a.Admitted() && a.Age(p.cfg.Clock.Now()) > p.cfg.AdmissionMaxAge; reads++ {
		again, err := p.ledger.ScopeRecheck(ctx, s.tenant.Scope, s.jobID, probe, p.admitPolicy(s))
		if err != nil {
			return again, err
		}
		p.metrics.AdmissionRechecked(s.tenant.Scope, !again.Admitted())
		a = again
	}
	return a, nil
}

// submissionDetail is what a submission's event records: its scope,
// whether it was the probe, and the admission it goes out under: the
// scope's sequence number it read (admitted_seq: the offers it knew of)
// and the database's clock it compared the deadline to (admitted_at); in
// observe-only mode, observe. ledger.SubmissionChecks judges it by these.
func submissionDetail(s *stepCtx, a ledger.Admission) map[string]any {
	d := map[string]any{"scope": s.tenant.Scope, "probe": a.Verdict == ledger.VerdictProbe,
		"admitted_at": a.At.UTC().Format(time.RFC3339Nano), "admitted_seq": a.Seq}
	if s.observeOnly {
		d["observe"] = true
	}
	return d
}

func (p *Pipeline) admitPolicy(s *stepCtx) ledger.AdmitPolicy {
	return ledger.AdmitPolicy{
		ProbeTimeout: p.cfg.ProbeTimeout, ProbeWait: p.cfg.ProbeWait, PausedRecheck: p.cfg.PausedRecheck,
		ObserveOnly: s.observeOnly, Clock: p.cfg.Clock,
	}
}

// admit asks the ledger whether the recording's scope admits a request
// now. The step's first check decides from the scope's deferral read with
// the recording (stepCtx.scopeRead); later checks read the scope again.
func (p *Pipeline) admit(ctx context.Context, s *stepCtx) (ledger.Admission, error) {
	policy := p.admitPolicy(s)
	if read := s.scopeRead; read != nil && read.Scope == s.tenant.Scope {
		s.scopeRead = nil
		return p.ledger.ScopeAdmitWaitFrom(ctx, *read, s.jobID, policy)
	}
	return p.ledger.ScopeAdmitWait(ctx, s.tenant.Scope, s.jobID, policy)
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

// submit sends the recording to the vendor, holding nothing while it
// waits. The submission was recorded under admission a; if a has grown
// older than AdmissionMaxAge since (a slow write, a descheduled worker),
// the scope is read again first, and a refusal withdraws the submission
// unsent (submitted -> retry_wait). The event that records the answer
// also records the instant just before the request was written (sent_at)
// and, after such a read, the admission it went out under.
func (p *Pipeline) submit(ctx context.Context, s *stepCtx, a ledger.Admission, probe bool, url string) (outcome, error) {
	rec := s.rec
	model := rec.Model
	if model == "" {
		model = s.tenant.Model
	}
	sent := map[string]any{}
	again, err := p.recheck(ctx, s, a, probe)
	if err != nil {
		return next, err
	}
	if !again.Admitted() {
		return p.withdraw(ctx, s, again)
	}
	if !again.ReadAt.Equal(a.ReadAt) {
		a = again
		sent["admitted_seq"], sent["admitted_at"] = a.Seq, a.At.UTC().Format(time.RFC3339Nano)
	}
	req := stt.Request{
		IdempotencyKey: rec.BusinessKey, TenantID: rec.TenantID, CallID: rec.CallID, AudioSHA256: rec.AudioSHA256,
		AudioURL: url, AudioName: path.Base(rec.AudioURI), AudioBytes: rec.AudioBytes, Model: model, Language: rec.Language,
		RequestID: fmt.Sprintf("%s-%d", rec.ID, rec.Attempt),
		OpenAudio: func(ctx context.Context) (io.ReadCloser, error) { return p.audio.Open(ctx, rec.AudioURI) },
		Header:    http.Header{HeaderAdmittedAt: []string{a.At.UTC().Format(time.RFC3339Nano)}},
	}
	sentAt := p.cfg.Clock.Now()
	sent["sent_at"] = sentAt.UTC().Format(time.RFC3339Nano)
	s.sent = sent
	p.metrics.AdmissionGap(s.tenant.Scope, a.Age(sentAt))
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

// recheckReads bounds the scope reads just before sending: when the
// database answers slower than AdmissionMaxAge, the request goes out after
// the last of them.
const recheckReads = 3

// withdraw takes back a recorded submission that was never sent: the
// scope refused it when asked again just before sending (a). The recording
// waits in retry_wait; the slots go back untouched.
func (p *Pipeline) withdraw(ctx context.Context, s *stepCtx, a ledger.Admission) (outcome, error) {
	p.release(ctx, s, capacity.Neutral, "")
	until := a.At.Add(a.Wait)
	_, err := p.move(ctx, s.rec, ledger.StateRetryWait, "withdrawn before sending: the scope refused it when asked again ("+string(a.Verdict)+")",
		func(tr *ledger.Transition) {
			tr.NotBefore = &until
			tr.Detail = map[string]any{"withdrawn": true, "scope": s.tenant.Scope, "admitted_seq": a.Seq,
				"admitted_at": a.At.UTC().Format(time.RFC3339Nano)}
		})
	return next, err
}

// answerDetail adds to detail, once, what the step's send recorded for the
// event that records the vendor's answer: sent_at, and the admission the
// request went out under when it was read again just before.
func (s *stepCtx) answerDetail(detail map[string]any) map[string]any {
	if len(s.sent) == 0 {
		return detail
	}
	if detail == nil {
		detail = map[string]any{}
	}
	for k, v := range s.sent {
		detail[k] = v
	}
	s.sent = nil
	return detail
}

func (p *Pipeline) audioProblem(ctx context.Context, rec ledger.Recording, err error) (outcome, error) {
	reason := "audio cannot be read: " + err.Error()
	if errors.Is(err, audio.ErrTooLarge) {
		reason = "audio too large: " + err.Error()
	}
	_, merr := p.move(ctx, rec, ledger.StateFailed, reason, func(t *ledger.Transition) { t.ResponseClass = "audio" })
	return done, merr
}
