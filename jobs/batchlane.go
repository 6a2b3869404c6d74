package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// The batch lane's defaults (BatchConfig).
const (
	BatchMaxItemsDefault        = 100
	BatchMaxAudioSecondsDefault = 10 * 3600
	BatchMaxWaitDefault         = 30 * time.Second
	BatchFormEveryDefault       = time.Second
	BatchPollIntervalDefault    = 2 * time.Second
)

// BatchConfig configures the batch lane's manifests: batch recordings of a
// tenant whose vendor has a batch contract (generic-http) are sent in
// groups, one request per manifest, instead of one request each.
type BatchConfig struct {
	// Manifests turns them on. Default false: the batch lane submits
	// every recording alone.
	Manifests bool `yaml:"manifests"`
	// MaxItems bounds a manifest's items (at most stt.MaxBatchItems).
	// Default 100.
	MaxItems int `yaml:"max_items"`
	// MaxAudioSeconds bounds a manifest's total audio. Default 36000.
	MaxAudioSeconds float64 `yaml:"max_audio_seconds"`
	// MaxWait: a manifest not yet full is sent once its oldest recording
	// has waited this long. Default 30s.
	MaxWait time.Duration `yaml:"max_wait"`
	// FormEvery is how often the lane looks for recordings to group.
	// Default 1s.
	FormEvery time.Duration `yaml:"form_every"`
	// PollInterval between polls of an accepted manifest when the vendor
	// gives no Retry-After (batch work is not urgent: fewer polls).
	// Default 2s.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// FormManifestsArgs groups waiting batch recordings into manifests; it
// runs periodically (BatchConfig.FormEvery).
type FormManifestsArgs struct{}

// Kind is the River job kind.
func (FormManifestsArgs) Kind() string { return "batch_form" }

// InsertOpts: on the batch queue, one at a time.
func (FormManifestsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

// ManifestArgs drives one manifest: its submission, its polls, its items'
// outcomes.
type ManifestArgs struct {
	ManifestID uuid.UUID `json:"manifest_id" river:"unique"`
}

// Kind is the River job kind.
func (ManifestArgs) Kind() string { return "batch_manifest" }

// InsertOpts: on the batch queue, one active job per manifest.
func (ManifestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

type formWorker struct {
	river.WorkerDefaults[FormManifestsArgs]
	p *Pipeline
}

func (w *formWorker) Work(ctx context.Context, _ *river.Job[FormManifestsArgs]) error {
	_, err := w.p.FormManifests(ctx)
	return err
}

type manifestWorker struct {
	river.WorkerDefaults[ManifestArgs]
	p *Pipeline
}

func (w *manifestWorker) Work(ctx context.Context, job *river.Job[ManifestArgs]) error {
	return w.p.driveManifest(ctx, job.ID, job.Args.ManifestID)
}

// unbatchedScopes remembers the scopes whose vendor answered that it
// offers no batches: their batch work goes one by one.
type unbatchedScopes struct{ m sync.Map }

func (u *unbatchedScopes) mark(scope string) { u.m.Store(scope, true) }

func (u *unbatchedScopes) has(scope string) bool {
	_, ok := u.m.Load(scope)
	return ok
}

// manifestMode reports whether tenant's batch recordings go in manifests:
// manifests are on, its vendor has a batch contract, and its scope has not
// answered that it offers none.
func (p *Pipeline) manifestMode(tenant string) bool {
	if !p.cfg.Batch.Manifests {
		return false
	}
	t, ok := p.cfg.Tenants[tenant]
	if !ok {
		return false
	}
	bp, ok := p.providers[tenant].(stt.BatchProvider)
	return ok && bp.Capabilities().Batch && !p.unbatched.has(t.Scope)
}

// FormManifests groups eligible batch recordings of tenants in manifest
// mode into manifests, by tenant, model and the manifest that sent them
// back (a resubmission carries only its predecessor's unfinished items),
// each bounded by BatchConfig.MaxItems and MaxAudioSeconds. A group is
// sent when it fills a manifest, when its oldest recording has waited
// MaxWait, or at once when it is a resubmission. Each manifest and the job
// that drives it are written in one transaction; it returns how many were
// formed.
func (p *Pipeline) FormManifests(ctx context.Context) (int, error) {
	var tenants []string
	for id := range p.cfg.Tenants {
		if p.manifestMode(id) {
			tenants = append(tenants, id)
		}
	}
	if len(tenants) == 0 {
		return 0, nil
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return 0, fmt.Errorf("forming manifests: %w", err)
	}
	bc := p.cfg.Batch
	formed := 0
	err = pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		formed = 0
		recs, back, err := p.ledger.BatchCandidatesTx(ctx, tx, tenants, bc.MaxItems*8)
		if err != nil {
			return err
		}
		type groupKey struct {
			tenant, model string
			back          uuid.UUID
		}
		var order []groupKey
		groups := map[groupKey][]ledger.Recording{}
		for _, r := range recs {
			k := groupKey{r.TenantID, p.modelOf(r), back[r.ID]}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], r)
		}
		now := p.cfg.Clock.Now()
		var params []river.InsertManyParams
		for _, k := range order {
			chunks := chunkManifest(groups[k], bc.MaxItems, bc.MaxAudioSeconds)
			for i, c := range chunks {
				var reason string
				switch {
				case k.back != uuid.Nil:
					reason = "resubmission: the items of manifest " + k.back.String() + " still unfinished"
				case i < len(chunks)-1 || len(c) >= bc.MaxItems:
					reason = fmt.Sprintf("full: %d items", len(c))
				case audioSeconds(c) >= bc.MaxAudioSeconds:
					reason = fmt.Sprintf("full: %.0f s of audio", audioSeconds(c))
				case now.Sub(c[0].UpdatedAt) >= bc.MaxWait:
					reason = fmt.Sprintf("the oldest item waited %s (max_wait %s)", now.Sub(c[0].UpdatedAt).Round(time.Millisecond), bc.MaxWait)
				default:
					continue // not full, not waited long enough
				}
				t := p.cfg.Tenants[k.tenant]
				prov := p.providers[k.tenant]
				nm := ledger.NewManifest{Key: manifestKey(k.tenant, prov.Name(), k.model), TenantID: k.tenant, Provider: prov.Name(),
					Model: k.model, Scope: t.Scope, Recordings: c, Reason: reason}
				if k.back != uuid.Nil {
					b := k.back
					nm.ResubmissionOf = &b
				}
				m, err := p.ledger.FormManifestTx(ctx, tx, nm)
				if err != nil {
					return err
				}
				params = append(params, river.InsertManyParams{Args: ManifestArgs{ManifestID: m.ID}})
				formed++
			}
		}
		if len(params) == 0 {
			return nil
		}
		if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueueing %d manifests: %w", len(params), err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("forming manifests: %w", err)
	}
	if formed > 0 {
		p.log.Info("batch lane: manifests formed", slog.Int("manifests", formed))
	}
	return formed, nil
}

// manifestKey is a new manifest's stable key.
func manifestKey(tenant, provider, model string) string {
	return fmt.Sprintf("manifest:%s:%s:%s:%s", tenant, provider, model, uuid.Must(uuid.NewV7()))
}

// modelOf is the model a recording is transcribed with.
func (p *Pipeline) modelOf(r ledger.Recording) string {
	if r.Model != "" {
		return r.Model
	}
	return p.cfg.Tenants[r.TenantID].Model
}

func audioSeconds(rs []ledger.Recording) float64 {
	var s float64
	for _, r := range rs {
		s += r.AudioDuration.Seconds()
	}
	return s
}

// chunkManifest splits rs, in order, into manifests of at most maxItems
// items and maxSeconds of audio (a single longer recording goes alone).
func chunkManifest(rs []ledger.Recording, maxItems int, maxSeconds float64) [][]ledger.Recording {
	var out [][]ledger.Recording
	var cur []ledger.Recording
	var secs float64
	for _, r := range rs {
		d := r.AudioDuration.Seconds()
		if len(cur) > 0 && (len(cur) >= maxItems || secs+d > maxSeconds) {
			out, cur, secs = append(out, cur), nil, 0
		}
		cur, secs = append(cur, r), secs+d
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

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
			observeOnly: p.observeOnly(t) || p.rollout.observed(ctx, p.ledger, t.Cohort),
			log:         p.log.With(slog.String("manifest", m.ID.String()))}}
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
	ms.s.log.Warn("the vendor offers no batches (404 on POST /v1/batches): the scope's batch work goes one by one", slog.String("scope", m.Scope))
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
