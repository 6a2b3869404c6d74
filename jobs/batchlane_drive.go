package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// manifestStep is what one step of a manifest knows.
type manifestStep struct {
	m     ledger.Manifest
	items []ledger.ManifestItem
	prov  stt.BatchProvider
	// s stands for the manifest in the scope's admission, window and the
	// vendor's capacity: its "recording" is the manifest (its id keys the
	// slots), on the batch lane.
	s *stepCtx
}

// driveManifest takes a manifest through its steps: send (admission,
// window, vendor slot; its recordings moved to submitted first, then the
// request), poll, and its items' outcomes, until every item is settled.
func (p *Pipeline) driveManifest(ctx context.Context, jobID int64, id uuid.UUID) error {
	p.adoptFormerScopes(ctx)
	for range maxSteps {
		m, items, err := p.ledger.Manifest(ctx, id)
		if errors.Is(err, ledger.ErrNotFound) {
			return river.JobCancel(fmt.Errorf("manifest %s no longer exists: %w", id, err))
		}
		if err != nil {
			return err
		}
		if m.State == ledger.ManifestDone || m.State == ledger.ManifestUnbatched {
			return nil
		}
		t, ok := p.cfg.Tenants[m.TenantID]
		prov, isBatch := p.providers[m.TenantID].(stt.BatchProvider)
		if !ok || !isBatch {
			return river.JobCancel(fmt.Errorf("manifest %s: tenant %q is not configured with a batch vendor any more; its recordings wait for an operator", id, m.TenantID))
		}
		ms := &manifestStep{m: m, items: items, prov: prov, s: &stepCtx{jobID: jobID, tenant: t, prov: prov,
			rec: ledger.Recording{ID: m.ID, TenantID: m.TenantID, Lane: ledger.LaneBatch, State: ledger.StateEligible,
				Deadline: m.CreatedAt.Add(p.cfg.BatchCompletionBound)},
			observeOnly: p.observeOnly(t) || p.rollout.observed(ctx, p.ledger, t.Cohort, p.cfg.RolloutDefault),
			log: p.log.With(slog.String("manifest", m.ID.String()), slog.String("tenant", m.TenantID), slog.String("scope", m.Scope),
				slog.Int64("job_id", jobID))}}
		var o outcome
		switch m.State {
		case ledger.ManifestFormed, ledger.ManifestSubmitted:
			o, err = p.sendManifest(ctx, ms)
		case ledger.ManifestAccepted:
			o, err = p.pollManifest(ctx, ms)
		}
		if errors.Is(err, ledger.ErrStateConflict) {
			continue
		}
		if err != nil {
			return err
		}
		switch o.kind {
		case stepDone:
			return nil
		case stepSnooze:
			return river.JobSnooze(o.snooze)
		}
	}
	return river.JobSnooze(0)
}

// pendingItems are the items not yet settled; sentItems those sent to the
// vendor (every item not dropped), in order.
func pendingItems(items []ledger.ManifestItem) []ledger.ManifestItem {
	var out []ledger.ManifestItem
	for _, it := range items {
		if it.State == ledger.ItemPending {
			out = append(out, it)
		}
	}
	return out
}

func manifestDetail(m ledger.Manifest) map[string]any {
	return map[string]any{"manifest_id": m.ID.String(), "manifest_key": m.Key}
}

// sendManifest sends a formed manifest (or one submitted before whose
// answer was lost: the same key and items again, which the vendor answers
// with the batch it created).
func (p *Pipeline) sendManifest(ctx context.Context, ms *manifestStep) (outcome, error) {
	m, s := ms.m, ms.s
	if len(pendingItems(ms.items)) == 0 {
		return done, p.closeManifest(ctx, ms, m.State, "no item left to send")
	}
	a, err := p.admit(ctx, s)
	if err != nil {
		return next, err
	}
	if !a.Admitted() {
		o, _ := p.waitInLine(ctx, s, a)
		return o, nil
	}
	probe := a.Verdict == ledger.VerdictProbe
	if o, _ := p.takeWindow(ctx, s, probe); o.kind == stepSnooze {
		return o, nil
	}
	if o := p.takeSlot(ctx, s); o.kind == stepSnooze {
		p.release(ctx, s, capacity.Neutral, "")
		return o, nil
	}
	defer func() {
		if !s.held.settled {
			p.release(ctx, s, capacity.Neutral, "")
		}
	}()
	if a, err = p.recheck(ctx, s, a, probe); err != nil || !a.Admitted() {
		if err != nil {
			return next, err
		}
		o, _ := p.waitInLine(ctx, s, a)
		return o, nil
	}
	if m.State == ledger.ManifestFormed {
		if ms.items, err = p.submitItems(ctx, ms, a); err != nil {
			return next, err
		}
		if len(pendingItems(ms.items)) == 0 {
			return done, p.closeManifest(ctx, ms, ledger.ManifestSubmitted, "every item had moved on before the request")
		}
	}
	req := stt.BatchRequest{ManifestKey: m.Key, Model: m.Model, RequestID: fmt.Sprintf("%s-%d", m.ID, s.jobID)}
	for _, it := range ms.items {
		if it.State == ledger.ItemDropped || it.State == ledger.ItemFailed {
			continue
		}
		rec, err := p.ledger.Recording(ctx, it.RecordingID)
		if err != nil {
			return next, err
		}
		url, err := p.audio.URL(ctx, rec.AudioURI, p.cfg.AudioURLTTL)
		if err != nil {
			// This recording alone fails; the others are sent.
			if err := p.itemFailed(ctx, ms, it, "audio", "audio cannot be read: "+err.Error()); err != nil {
				return next, err
			}
			continue
		}
		req.Items = append(req.Items, stt.Request{IdempotencyKey: it.BusinessKey, AudioURL: url, AudioSHA256: rec.AudioSHA256, Language: rec.Language})
	}
	if len(req.Items) == 0 {
		return done, p.closeManifest(ctx, ms, ledger.ManifestSubmitted, "no item could be sent")
	}
	// Signing the items' URLs may have taken a while: a manifest is not
	// sent on an admission older than AdmissionMaxAge. A refusal leaves it
	// submitted; its next run sends the same key and items.
	if a, err = p.recheck(ctx, s, a, probe); err != nil || !a.Admitted() {
		if err != nil {
			return next, err
		}
		o, _ := p.waitInLine(ctx, s, a)
		return o, nil
	}
	p.metrics.AdmissionGap(s.tenant.Scope, a.Age(p.cfg.Clock.Now()))
	resp, err := ms.prov.SubmitBatch(ctx, req)
	if errors.Is(err, stt.ErrBatchUnsupported) {
		p.release(ctx, s, capacity.Neutral, "")
		return done, p.unbatch(ctx, ms, resp.Response)
	}
	if err != nil {
		return next, fmt.Errorf("manifest %s: %w", m.ID, err)
	}
	if resp.Outcome == stt.OutcomePending || resp.Outcome == stt.OutcomeCompleted {
		faultPoint("after_batch_accepted")
		if probe {
			if err := p.ledger.ScopeProbeSucceeded(ctx, s.tenant.Scope, s.jobID); err != nil {
				return next, err
			}
		}
		// Accepted work is in flight at the vendor: like a single request
		// answered 202, the manifest keeps its window slot and its vendor
		// slot until its last item settles (closeManifest), refreshed at
		// each poll.
		s.held.settled = true
		if _, err := p.ledger.ManifestMoveTx(ctx, p.pool(), ledger.ManifestMove{ID: m.ID, From: ledger.ManifestSubmitted, To: ledger.ManifestAccepted,
			VendorBatchID: resp.ProviderID, Kind: "accepted", Reason: fmt.Sprintf("the vendor accepted batch %s (HTTP %d)", resp.ProviderID, resp.HTTPStatus),
			Detail: map[string]any{"items": len(req.Items)}}); err != nil {
			return next, err
		}
		ms.m.State, ms.m.VendorBatchID = ledger.ManifestAccepted, resp.ProviderID
		return p.applyBatch(ctx, ms, resp)
	}
	return p.manifestTrouble(ctx, ms, resp.Response, "submit", probe)
}

// submitItems moves each pending item's recording eligible → submitted
// (its event naming the manifest) and the manifest formed → submitted, in
// one transaction, before the request: an item whose recording has moved
// on (expired) is dropped. It returns the items as they now are.
func (p *Pipeline) submitItems(ctx context.Context, ms *manifestStep, a ledger.Admission) ([]ledger.ManifestItem, error) {
	probe := a.Verdict == ledger.VerdictProbe
	m := ms.m
	name := ms.prov.Name()
	out := append([]ledger.ManifestItem(nil), ms.items...)
	err := pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		sent := 0
		for i, it := range out {
			if it.State != ledger.ItemPending {
				continue
			}
			detail := submissionDetail(ms.s, a)
			maps.Copy(detail, manifestDetail(m))
			_, err := p.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: it.RecordingID, From: ledger.StateEligible,
				To: ledger.StateSubmitted, Reason: "admitted in manifest " + m.Key, Provider: &name, Detail: detail})
			if errors.Is(err, ledger.ErrStateConflict) {
				if _, err := p.ledger.SettleItemTx(ctx, tx, m.ID, it.RecordingID, ledger.ItemDropped, "", "its recording had moved on before the request"); err != nil {
					return err
				}
				out[i].State = ledger.ItemDropped
				continue
			}
			if err != nil {
				return err
			}
			sent++
		}
		_, err := p.ledger.ManifestMoveTx(ctx, tx, ledger.ManifestMove{ID: m.ID, From: ledger.ManifestFormed, To: ledger.ManifestSubmitted,
			Kind: "submitted", Reason: fmt.Sprintf("%d items submitted", sent), Detail: map[string]any{"probe": probe, "items": sent}})
		return err
	})
	if err != nil {
		return nil, err
	}
	ms.m.State = ledger.ManifestSubmitted
	return out, nil
}

// pollManifest asks the vendor about an accepted manifest.
func (p *Pipeline) pollManifest(ctx context.Context, ms *manifestStep) (outcome, error) {
	resp, err := ms.prov.PollBatch(ctx, ms.m.VendorBatchID)
	if err != nil {
		return next, fmt.Errorf("manifest %s: %w", ms.m.ID, err)
	}
	switch resp.Outcome {
	case stt.OutcomePending, stt.OutcomeCompleted:
		return p.applyBatch(ctx, ms, resp)
	case stt.OutcomeNotFound:
		_, err := p.ledger.ManifestMoveTx(ctx, p.pool(), ledger.ManifestMove{ID: ms.m.ID, From: ledger.ManifestAccepted, To: ledger.ManifestSubmitted,
			Kind: "forgotten", Reason: "the vendor no longer knows batch " + ms.m.VendorBatchID + ": sending the manifest again by its key"})
		return next, err
	}
	return p.manifestTrouble(ctx, ms, resp.Response, "poll", false)
}

// manifestTrouble handles an answer that is not the batch: a throttle
// defers the scope (the manifest waits and asks again with the same key),
// quota exhaustion pauses it, a transient failure backs off, and a
// permanent refusal of the whole request fails every pending item. A
// failed submission gives back the slots it took; a failed poll keeps the
// manifest's vendor slot (the vendor still has the work).
func (p *Pipeline) manifestTrouble(ctx context.Context, ms *manifestStep, resp stt.Response, op string, probe bool) (outcome, error) {
	m, s := ms.m, ms.s
	giveBack := func(o capacity.Outcome, reason string) {
		if op == "submit" {
			p.release(ctx, s, o, reason)
		}
	}
	note := func(kind, reason string) error {
		return p.ledger.ManifestNote(ctx, m.ID, kind, reason, map[string]any{"op": op, "status": resp.HTTPStatus, "class": resp.Class})
	}
	switch resp.Outcome {
	case stt.OutcomeThrottled:
		res, err := p.ledger.ScopeDeferralFromSignal(ctx, ledger.ThrottlePolicy{RetryAfter: p.cfg.RetryAfter, ObserveOnly: s.observeOnly},
			ledger.ThrottleSignal{Scope: m.Scope, Class: resp.Class, RetryAfter: resp.RetryAfter, Date: resp.Date, VendorDelay: resp.VendorDelay,
				VendorDelayHeader: resp.VendorDelayHeader, VendorDelayRaw: resp.VendorDelayRaw, JobID: s.jobID})
		if err != nil {
			return next, err
		}
		p.metrics.VendorThrottled(ms.prov.Name(), m.Scope, resp.HTTPStatus)
		if !s.observeOnly && res.NotBefore.After(p.cfg.Clock.Now()) {
			p.cooldown(ctx, s, fmt.Sprintf("HTTP %d %s", resp.HTTPStatus, resp.Class))
		}
		giveBack(capacity.Overload, fmt.Sprintf("HTTP %d %s", resp.HTTPStatus, resp.Class))
		if err := note("throttled", fmt.Sprintf("%s throttled (HTTP %d): the scope waits until %s", op, resp.HTTPStatus, res.NotBefore.Format(time.RFC3339))); err != nil {
			return next, err
		}
		return snoozeFor(res.NotBefore.Sub(p.cfg.Clock.Now())), nil
	case stt.OutcomeQuotaExhausted:
		giveBack(capacity.Neutral, "")
		if err := p.ledger.ScopePause(ctx, m.Scope, resp.Class+": "+resp.Message); err != nil {
			return next, err
		}
		return snoozeFor(p.cfg.PausedRecheck), note("paused", "quota exhausted: the scope is paused until an operator resumes it")
	case stt.OutcomePermanent:
		if probe {
			if err := p.ledger.ScopeProbeSucceeded(ctx, s.tenant.Scope, s.jobID); err != nil {
				return next, err
			}
		}
		giveBack(capacity.Success, "")
		reason := fmt.Sprintf("the vendor refused the manifest (%s, HTTP %d): %s", resp.Class, resp.HTTPStatus, resp.Message)
		for _, it := range pendingItems(ms.items) {
			if err := p.itemFailed(ctx, ms, it, resp.Class, reason); err != nil {
				return next, err
			}
		}
		return done, p.closeManifest(ctx, ms, m.State, reason)
	}
	giveBack(capacity.Neutral, "")
	d := p.cfg.RetryAfter.Decide("", false, 0)
	return snoozeFor(d.Delay), note("transient", fmt.Sprintf("%s failed (%s, HTTP %d): asking again", op, resp.Class, resp.HTTPStatus))
}

// applyBatch applies the batch's items to the manifest's pending ones:
// completed items go on to validation and commit at once, permanent
// failures fail alone, transient failures go back for a later manifest,
// and, once the batch has finished, so do the items it no longer lists
// (lost). When none is left pending the manifest is done.
func (p *Pipeline) applyBatch(ctx context.Context, ms *manifestStep, resp stt.BatchResponse) (outcome, error) {
	finished := resp.Outcome == stt.OutcomeCompleted
	byKey := make(map[string]stt.BatchItem, len(resp.Items))
	for _, it := range resp.Items {
		byKey[it.IdempotencyKey] = it
	}
	left := 0
	for _, it := range pendingItems(ms.items) {
		bi, listed := byKey[it.BusinessKey]
		var err error
		switch {
		case listed && bi.Response.Outcome == stt.OutcomeCompleted:
			err = p.itemCompleted(ctx, ms, it, bi.Response)
		case listed && bi.Response.Outcome == stt.OutcomePermanent:
			err = p.itemFailed(ctx, ms, it, bi.Response.Class,
				fmt.Sprintf("batch item failed (%s): %s", bi.Response.Class, bi.Response.Message))
		case listed && bi.Response.Outcome == stt.OutcomeTransient:
			err = p.itemResubmit(ctx, ms, it, bi.Response.Class, fmt.Sprintf("batch item failed (%s): sent again in a later manifest", bi.Response.Class))
		case !listed && finished:
			err = p.itemResubmit(ctx, ms, it, "lost", "lost: the finished batch does not list it; sent again in a later manifest")
		default:
			left++
		}
		if err != nil {
			return next, err
		}
	}
	if left == 0 {
		return done, p.closeManifest(ctx, ms, ledger.ManifestAccepted, "every item settled")
	}
	// Keep the window and vendor slots for the whole processing time.
	extra := 2 * p.batchPollWait(resp.Response)
	if p.windowed(ms.s) {
		p.window.Refresh(ctx, ms.s.tenant.Scope, ms.m.ID.String(), extra)
	}
	if p.slots != nil {
		p.slots.Extend(ctx, ms.prov.Name(), ms.m.ID.String(), extra)
	}
	if err := p.ledger.ManifestNote(ctx, ms.m.ID, "polled", fmt.Sprintf("%d items still processing", left), nil); err != nil {
		return next, err
	}
	return snoozeFor(p.batchPollWait(resp.Response)), nil
}

// batchPollWait is when to poll a manifest next: the answer's
// Retry-After, else BatchConfig.PollInterval.
func (p *Pipeline) batchPollWait(resp stt.Response) time.Duration {
	if resp.PollAfter != nil {
		if d := p.cfg.RetryAfter.Decide(*resp.PollAfter, true, 0); d.Delay > 0 {
			return d.Delay
		}
	}
	return p.cfg.Batch.PollInterval
}

// itemStep loads an item's recording for a step of its own. settled is
// true when the recording is no longer submitted: the item is then
// settled by where the recording stands (a crash between the recording's
// move and the item's, or another worker's move).
func (p *Pipeline) itemStep(ctx context.Context, ms *manifestStep, it ledger.ManifestItem) (*stepCtx, bool, error) {
	s, err := p.load(ctx, ms.s.jobID, it.RecordingID, "")
	if err != nil {
		return nil, false, err
	}
	var state ledger.ItemState
	switch s.rec.State {
	case ledger.StateSubmitted:
		return s, false, nil
	case ledger.StateTranscribed, ledger.StateValidated, ledger.StateCommitted:
		state = ledger.ItemCompleted
	case ledger.StateFailed:
		state = ledger.ItemFailed
	case ledger.StateEligible, ledger.StateRetryWait:
		state = ledger.ItemResubmit
	default:
		state = ledger.ItemDropped
	}
	_, err = p.ledger.SettleItemTx(ctx, p.pool(), ms.m.ID, it.RecordingID, state, "", "its recording is "+string(s.rec.State))
	return s, true, err
}

// itemCompleted stores the item's transcript and takes its recording on
// to committed (finish), then settles the item.
func (p *Pipeline) itemCompleted(ctx context.Context, ms *manifestStep, it ledger.ManifestItem, resp stt.Response) error {
	s, settled, err := p.itemStep(ctx, ms, it)
	if err != nil || settled {
		return err
	}
	err = p.transcribedWith(ctx, s, resp, manifestDetail(ms.m))
	if err != nil && !errors.Is(err, ledger.ErrStateConflict) {
		return err
	}
	_, err = p.ledger.SettleItemTx(ctx, p.pool(), ms.m.ID, it.RecordingID, ledger.ItemCompleted, resp.ProviderID, "")
	return err
}

// itemFailed fails the item's recording and settles the item, in one
// transaction.
func (p *Pipeline) itemFailed(ctx context.Context, ms *manifestStep, it ledger.ManifestItem, class, reason string) error {
	_, settled, err := p.itemStep(ctx, ms, it)
	if err != nil || settled {
		return err
	}
	p.metrics.VendorFailed(ms.prov.Name(), string(stt.OutcomePermanent))
	return pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		if _, err := p.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: it.RecordingID, From: ledger.StateSubmitted, To: ledger.StateFailed,
			Reason: reason, ResponseClass: class, Detail: manifestDetail(ms.m)}); err != nil {
			return err
		}
		_, err := p.ledger.SettleItemTx(ctx, tx, ms.m.ID, it.RecordingID, ledger.ItemFailed, "", reason)
		return err
	})
}

// itemResubmit sends the item's recording back to eligible (submitted →
// retry_wait → eligible, one event each) for a later manifest, and
// settles the item, in one transaction.
func (p *Pipeline) itemResubmit(ctx context.Context, ms *manifestStep, it ledger.ManifestItem, class, reason string) error {
	_, settled, err := p.itemStep(ctx, ms, it)
	if err != nil || settled {
		return err
	}
	return pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		detail := manifestDetail(ms.m)
		if _, err := p.ledger.AdvanceTx(ctx, tx, ledger.Advance{RecordingID: it.RecordingID, Steps: []ledger.Transition{
			{From: ledger.StateSubmitted, To: ledger.StateRetryWait, Reason: reason, ResponseClass: class, Detail: detail},
			{From: ledger.StateRetryWait, To: ledger.StateEligible, Reason: "back in the batch lane for a later manifest"},
		}}); err != nil {
			return err
		}
		_, err := p.ledger.SettleItemTx(ctx, tx, ms.m.ID, it.RecordingID, ledger.ItemResubmit, "", reason)
		return err
	})
}

// unbatch: the vendor offers no batches. The scope is remembered (its
// batch work goes one by one from now on), the manifest is closed as
// unbatched, and each pending item's recording goes back to eligible with
// a transcribe job of its own.
func (p *Pipeline) unbatch(ctx context.Context, ms *manifestStep, resp stt.Response) error {
	m := ms.m
	p.unbatched.mark(m.Scope)
	ms.s.log.Warn("the vendor offers no batches (404 on POST /v1/batches): the scope's batch work goes one by one")
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	reason := fmt.Sprintf("the vendor offers no batches (HTTP %d): submitted one by one", resp.HTTPStatus)
	return pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		var params []river.InsertManyParams
		for _, it := range pendingItems(ms.items) {
			rec, err := p.ledger.AdvanceTx(ctx, tx, ledger.Advance{RecordingID: it.RecordingID, Steps: []ledger.Transition{
				{From: ledger.StateSubmitted, To: ledger.StateRetryWait, Reason: reason, ResponseClass: resp.Class, Detail: manifestDetail(m)},
				{From: ledger.StateRetryWait, To: ledger.StateEligible, Reason: "one by one"},
			}})
			if errors.Is(err, ledger.ErrStateConflict) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := p.ledger.SettleItemTx(ctx, tx, m.ID, it.RecordingID, ledger.ItemResubmit, "", reason); err != nil {
				return err
			}
			params = append(params, river.InsertManyParams{Args: transcribeArgs(rec.ID, rec.TenantID, rec.Lane)})
		}
		if _, err := p.ledger.ManifestMoveTx(ctx, tx, ledger.ManifestMove{ID: m.ID, From: m.State, To: ledger.ManifestUnbatched,
			Kind: "unbatched", Reason: reason}); err != nil {
			return err
		}
		if len(params) > 0 {
			if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
				return err
			}
		}
		return nil
	})
}

// closeManifest moves the manifest from `from` to done and gives back its
// window slot (the request answered: the window may grow) and its vendor
// slot.
func (p *Pipeline) closeManifest(ctx context.Context, ms *manifestStep, from ledger.ManifestState, reason string) error {
	p.release(ctx, ms.s, capacity.Success, "")
	_, err := p.ledger.ManifestMoveTx(ctx, p.pool(), ledger.ManifestMove{ID: ms.m.ID, From: from, To: ledger.ManifestDone, Kind: "done", Reason: reason})
	return err
}
