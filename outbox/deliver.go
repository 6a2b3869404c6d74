package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// Delivery states of an outbox row.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateDead      = "dead"
)

// Row is an outbox row.
type Row struct {
	ID             int64     `json:"id"`
	ActionSetID    int64     `json:"action_set_id"`
	Target         string    `json:"target"`
	Scope          string    `json:"scope"`
	IdempotencyKey string    `json:"idempotency_key"`
	State          string    `json:"state"`
	Attempts       int       `json:"attempts"`
	CRMID          string    `json:"crm_id"`
	LastClass      string    `json:"last_class"`
	NotBefore      time.Time `json:"not_before"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// Deadline: a row still pending then goes to dead. Fixed at commit
	// (commit time + the target's DeliveryDeadline), renewed by Retry.
	Deadline time.Time `json:"deadline"`
	TenantID string    `json:"tenant_id"`
	CallID   string    `json:"call_id"`

	// Read by a delivery try only (deliveryByID), for its receipt -> CRM
	// figure: the recording's receipt time as stored with the row (nil:
	// not stored) and the recording's id, to ask the ledger then.
	receivedAt  *time.Time
	recordingID uuid.UUID
}

// rowFrom converts an outbox row joined with its action set.
func rowFrom(r dbsqlc.OutboxGetRow) Row {
	return Row{ID: r.ID, ActionSetID: r.ActionSetID, Target: r.Target, Scope: r.Scope, IdempotencyKey: r.IdempotencyKey,
		State: r.State, Attempts: int(r.Attempts), CRMID: r.CrmID, LastClass: r.LastClass,
		NotBefore: pgtime.Read(r.NotBefore), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Deadline: r.Deadline.UTC(),
		TenantID: r.TenantID, CallID: r.CallID}
}

// Rows lists outbox rows, oldest first; state "" = any.
func (o *Outbox) Rows(ctx context.Context, state string, limit int) ([]Row, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := o.queries.OutboxList(ctx, o.pool, dbsqlc.OutboxListParams{State: state, MaxRows: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing outbox rows: %w", translate(err))
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = rowFrom(dbsqlc.OutboxGetRow(r))
	}
	return out, nil
}

// RowByID reads one outbox row, or ErrNotFound.
func (o *Outbox) RowByID(ctx context.Context, id int64) (Row, error) {
	r, err := o.queries.OutboxGet(ctx, o.pool, id)
	if err != nil {
		return Row{}, fmt.Errorf("reading outbox row %d: %w", id, translate(err))
	}
	return rowFrom(r), nil
}

// deliveryByID reads what a try of outbox row id needs in one statement:
// the row, its action set (its actions still encoded: a try that is not
// admitted never decodes them) and its recording's receipt time; or
// ErrNotFound. With scope (the job's DeliverArgs.Scope) set, the scope's
// deferral is read in the same round trip and implicit transaction, for
// the try's admission; the read returned is nil otherwise.
func (o *Outbox) deliveryByID(ctx context.Context, id int64, scope string) (Row, dbsqlc.ActionSet, *ledger.ScopeRead, error) {
	var r dbsqlc.OutboxDeliveryGetRow
	var read *ledger.ScopeRead
	var err error
	if scope == "" {
		r, err = o.queries.OutboxDeliveryGet(ctx, o.pool, id)
	} else {
		b := &pgx.Batch{}
		dbsqlc.QueueOutboxDeliveryGet(b, id, func(row dbsqlc.OutboxDeliveryGetRow, rerr error) { r, err = row, rerr })
		read = o.ledger.QueueScopeRead(b, scope)
		if berr := o.pool.SendBatch(ctx, b).Close(); berr != nil {
			err = berr
		}
	}
	if err != nil {
		return Row{}, dbsqlc.ActionSet{}, nil, fmt.Errorf("reading outbox row %d: %w", id, translate(err))
	}
	row, set := deliveryFrom(r)
	if read != nil && read.Scope != row.Scope {
		read = nil // the job's scope is not the row's: admission reads the row's
	}
	return row, set, read, nil
}

// deliveryFrom is the row and action set of r, as a try takes them.
func deliveryFrom(r dbsqlc.OutboxDeliveryGetRow) (Row, dbsqlc.ActionSet) {
	row := rowFrom(dbsqlc.OutboxGetRow{ID: r.ID, ActionSetID: r.ActionSetID, Target: r.Target, Scope: r.Scope,
		IdempotencyKey: r.IdempotencyKey, State: r.State, Attempts: r.Attempts, CrmID: r.CrmID, LastClass: r.LastClass,
		NotBefore: r.NotBefore, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Deadline: r.Deadline,
		TenantID: r.TenantID, CallID: r.CallID})
	row.receivedAt, row.recordingID = r.ReceivedAt, r.RecordingID
	set := dbsqlc.ActionSet{ID: r.ActionSetID, RecordingID: r.RecordingID, TenantID: r.TenantID, CallID: r.CallID,
		ActionVersion: r.ActionVersion, RecordingSha256: r.RecordingSha256, Actions: r.Actions, CommittedAt: r.CommittedAt}
	return row, set
}

// receivedAt is rec's receipt time as an outbox row of its action set
// stores it (nil: unknown).
func receivedAt(rec ledger.Recording) *time.Time {
	if rec.CreatedAt.IsZero() {
		return nil
	}
	return pgtime.WritePtr(&rec.CreatedAt)
}

// Event is one delivery try (or operator action) of an outbox row.
type Event struct {
	Attempt       int       `json:"attempt"`
	At            time.Time `json:"at"`
	Prior         string    `json:"prior_state"`
	New           string    `json:"new_state"`
	Outcome       string    `json:"outcome"`
	ResponseClass string    `json:"response_class"`
	HTTPStatus    int       `json:"http_status"`
	CRMID         string    `json:"crm_id"`
	RetryAfter    *string   `json:"retry_after_raw"`
	Reason        string    `json:"reason"`
}

// Events lists a row's history, oldest first.
func (o *Outbox) Events(ctx context.Context, id int64) ([]Event, error) {
	rows, err := o.queries.OutboxEventList(ctx, o.pool, id)
	if err != nil {
		return nil, fmt.Errorf("reading events of outbox row %d: %w", id, translate(err))
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{Attempt: int(r.Attempt), At: r.At.UTC(), Prior: r.PriorState, New: r.NewState, Outcome: r.Outcome,
			ResponseClass: r.ResponseClass, HTTPStatus: int(r.HttpStatus), CRMID: r.CrmID, RetryAfter: r.RetryAfterRaw, Reason: r.Reason}
	}
	return out, nil
}

// Retry moves a dead row back to pending with a fresh deadline (now + its
// target's DeliveryDeadline; DeliveryDeadlineDefault for a tenant no longer
// configured) and enqueues its delivery with client, with an event saying
// so. The delivery keeps its idempotency key: a CRM that had applied the
// set answers the new try with a replay.
func (o *Outbox) Retry(ctx context.Context, client *river.Client[pgx.Tx], id int64) error {
	now := pgtime.Write(o.cfg.Clock.Now())
	return pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		r, err := o.queries.OutboxGet(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("reading outbox row %d: %w", id, translate(err))
		}
		window := DeliveryDeadlineDefault
		if dest, ok := o.cfg.Destinations[r.TenantID]; ok {
			window = dest.DeliveryDeadline
		}
		deadline := now.Add(window)
		_, err = o.queries.OutboxSettle(ctx, tx, dbsqlc.OutboxSettleParams{ID: id, FromState: StateDead, State: StatePending,
			LastClass: "operator", At: now, Deadline: &deadline, Outcome: "retry",
			Reason: fmt.Sprintf("operator retry; new delivery deadline %s (%s)", deadline.Format(time.RFC3339), shortDuration(window))})
		if err = translate(err); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("outbox row %d is not dead: %w", id, ErrNotDead)
		}
		if err != nil {
			return err
		}
		jr, err := client.InsertTx(ctx, tx, DeliverArgs{OutboxID: id, Scope: r.Scope}, nil)
		if err != nil || !jr.UniqueSkippedAsDuplicate {
			return err
		}
		// The row's last job still counts as active: River marks a job
		// completed only after its Work returned.
		if jr.Job.State == rivertype.JobStateRunning {
			return fmt.Errorf("outbox row %d: %w", id, ErrJobRunning)
		}
		_, err = client.JobRetryTx(ctx, tx, jr.Job.ID)
		return err
	})
}

// ErrJobRunning: the row's delivery job is still finishing; nothing was
// changed; try again in a moment.
var ErrJobRunning = errors.New("its delivery job is still running")

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	o *Outbox
}

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	return w.o.deliver(ctx, job.ID, job.Args.OutboxID, job.Args.Scope)
}

// settleAs records a try's outcome, the row's new state and the CRM's
// usage gauges (res.Gauges) in one statement, with the row's last class
// set to rowClass ("": the answer's class, as the event records it).
func (o *Outbox) settleAs(ctx context.Context, r Row, state, rowClass string, res connector.Result, notBefore *time.Time, reason string) error {
	names, values := gauges(res.Gauges)
	p := dbsqlc.OutboxSettleParams{ID: r.ID, FromState: StatePending, State: state,
		CrmID: res.CRMID, LastClass: res.Class, RowClass: rowClass, At: pgtime.Write(o.cfg.Clock.Now()), NotBefore: pgtime.WritePtr(notBefore),
		Outcome: string(res.Outcome), HttpStatus: int32(res.HTTPStatus), RetryAfterRaw: res.RetryAfter, Reason: reason,
		GaugeNames: names, GaugeValues: values}
	var err error
	if len(names) == 0 {
		// Shared with other steps (group commit), its one statement sent
		// with the group's other queued ones. A settlement with the CRM's
		// gauges commits alone: it locks the shared counter rows, which a
		// group would hold across its other steps.
		err = o.commit.CommitQueued(ctx, func(q *ledger.Queue) ledger.FinishFunc {
			var qerr error
			// Merged with the group's other settlements: one statement.
			ledger.QueueMerged(q, settleMergeKey{}, p.ID, p, func(_ int64, err error) { qerr = err },
				dbsqlc.QueueOutboxSettle, dbsqlc.QueueOutboxSettleMany)
			return func(_ context.Context, tx pgx.Tx, batchErr error) error {
				if qerr == nil && batchErr != nil {
					qerr = batchErr // the statement's answer never came
				}
				return ledger.KeptUsable(tx, qerr)
			}
		}, nil)
	} else {
		_, err = o.queries.OutboxSettle(ctx, o.pool, p)
	}
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return nil // settled meanwhile by another try
	}
	if err == nil && state != StatePending {
		o.settled(ctx, r, state)
	}
	return err
}

type settleMergeKey struct{}

// gauges are the CRM's usage figures (Sforce-Limit-Info, HubSpot remaining
// calls), kept as gauges for operators: their names sorted, so that
// concurrent settles lock the counters in one order, and their values;
// nil for none.
func gauges(g map[string]float64) (names []string, values []int64) {
	if len(g) == 0 {
		return nil, nil
	}
	names = slices.Sorted(maps.Keys(g))
	values = make([]int64, len(names))
	for i, name := range names {
		values[i] = int64(g[name])
	}
	return names, values
}

// settled records a row settled as state (by a try, or by its deadline),
// once: the statement that settled it succeeded.
func (o *Outbox) settled(ctx context.Context, r Row, state string) {
	if _, none := o.metrics.(noMetrics); none {
		return
	}
	var since time.Duration
	if state == StateDelivered {
		switch {
		case r.receivedAt != nil:
			since = o.cfg.Clock.Now().Sub(*r.receivedAt)
		case r.recordingID != uuid.Nil:
			// Not stored with the row (committed by a version that did
			// not store it, after migration 00009 ran): ask the ledger.
			if rec, err := o.ledger.Recording(ctx, r.recordingID); err == nil {
				since = o.cfg.Clock.Now().Sub(rec.CreatedAt)
			}
		}
	}
	o.metrics.CRMSettled(r.Target, state, since)
}

// deliver is one try of outbox row id (try), the row read with its
// action set and, with scope (the job's DeliverArgs.Scope) set, its
// scope's deferral in one round trip (deliveryByID).
func (o *Outbox) deliver(ctx context.Context, jobID, id int64, scope string) error {
	r, stored, read, err := o.deliveryByID(ctx, id, scope)
	if errors.Is(err, ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	return o.tryRow(ctx, jobID, r, stored, read, false)
}

// deliverCommitted is the prompt try of a row its process's group has
// just committed: the row and its set as the commit's statement returned
// them (d, as OutboxDeliveryGet reads them), and only the scope's
// deferral read, in one round trip. Nothing else has written the row
// since: a prompt row has no River job until its try hands it one, and
// the orphan sweep leaves a row untouched this recently alone. The try
// counts itself on the row (OutboxTry) only while the row is pending, as
// after deliveryByID.
func (o *Outbox) deliverCommitted(ctx context.Context, d dbsqlc.OutboxDeliveryGetRow) error {
	b := &pgx.Batch{}
	read := o.ledger.QueueScopeRead(b, d.Scope)
	if err := o.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("reading the deferral of scope %s for outbox row %d: %w", d.Scope, d.ID, translate(err))
	}
	r, set := deliveryFrom(d)
	return o.tryRow(ctx, 0, r, set, read, true)
}

// tryRow is one try of row r with its action set (try), as a prompt try
// when prompt; read is its scope's deferral, or nil.
func (o *Outbox) tryRow(ctx context.Context, jobID int64, r Row, stored dbsqlc.ActionSet, read *ledger.ScopeRead, prompt bool) error {
	s := &subject{Row: r, set: stored, holder: holderOf(r.ID), lane: lane.Immediate, logAttr: slog.Int64("outbox", r.ID), prompt: prompt}
	s.store = &rowStore{o: o, s: s}
	if dest, ok := o.cfg.Destinations[r.TenantID]; ok && dest.Target != nil {
		s.target = dest.Target
	} else {
		s.noTarget = fmt.Sprintf("tenant %s has no CRM target configured", r.TenantID)
	}
	return o.try(ctx, jobID, s, read)
}

// try is one try of s (an outbox row or a replay delivery): admission to
// the CRM's scope and a slot of its window (Config.Window), the call
// holding no transaction or connection, the slot given back with what the
// CRM answered, and the outcome recorded through s.store.
//
// A try of an outbox row that the CRM answers costs three transactions:
// the read of the row with its action set and its scope's deferral
// (deliveryByID, one round trip; a prompt try reads the scope's deferral
// only, deliverCommitted), the try counted before the call
// (OutboxTry, durable before the CRM sees the set), and the settle
// (outcome, event and the CRM's gauges together); besides them, for a
// probe or a throttle, the scope's update, and for a scope without its row
// yet, the admission's own read. read is the scope's deferral read with
// the delivery, or nil.
func (o *Outbox) try(ctx context.Context, jobID int64, s *subject, read *ledger.ScopeRead) error {
	s.withLog(o.cfg.Logger, jobID)
	r := s.Row
	if r.State != StatePending {
		return nil
	}
	now := o.cfg.Clock.Now()
	if !now.Before(r.Deadline) {
		// Due at or after its deadline: no more tries; the job ends.
		return s.store.expire(ctx, now)
	}
	if wait := r.NotBefore.Sub(now); wait > 0 {
		return river.JobSnooze(untilDeadline(r, now, wait))
	}
	if s.target == nil {
		return s.store.settle(ctx, StateDead, "", connector.Result{Outcome: connector.OutcomeDead, Class: "config"}, nil, s.noTarget)
	}
	// A prompt try goes on only in a scope that is open: not paused,
	// deferred or waiting for its probe (a scope without its row yet has
	// never been deferred). Any of those is a wait, a River job's.
	if s.prompt && (read == nil || (read.Found && !read.Deferral.Open(now))) {
		return errNeedsJob
	}
	var err error
	policy := ledger.AdmitPolicy{ProbeTimeout: o.cfg.ProbeTimeout, ProbeWait: o.cfg.ProbeWait, Clock: o.cfg.Clock}
	var adm ledger.Admission
	if read != nil {
		adm, err = o.ledger.ScopeAdmitWaitFrom(ctx, *read, jobID, policy)
	} else {
		adm, err = o.ledger.ScopeAdmitWait(ctx, r.Scope, jobID, policy)
	}
	if err != nil {
		return err
	}
	if s.prompt && adm.Verdict != ledger.VerdictAdmit {
		// Deferred since the read, or (a scope read without its row) made
		// the probe: a River job waits, or probes, in its place.
		return errNeedsJob
	}
	if !adm.Admitted() {
		return river.JobSnooze(untilDeadline(r, now, o.waitInLine(ctx, s, jobID, adm)))
	}
	if wait, err := s.store.ready(ctx); err != nil || wait > 0 {
		if err != nil {
			return err
		}
		return river.JobSnooze(untilDeadline(r, now, wait))
	}
	if ok, wait := o.takeWindow(ctx, s, jobID, adm.Verdict == ledger.VerdictProbe); !ok {
		return river.JobSnooze(untilDeadline(r, now, wait))
	}
	// Whatever ends this try before its slot is settled (an error, a row
	// settled meanwhile) gives the slot back, with what the CRM said if
	// it answered.
	answer, why, settled := capacity.Neutral, "", false
	defer func() {
		if !settled {
			o.release(ctx, s, answer, why)
		}
	}()
	set, err := actionSetFrom(s.set)
	if err != nil {
		return err
	}
	attempt, err := s.store.try(ctx, now, adm)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	// The window's wait and the try's write may have taken a while: a
	// delivery is not sent on an admission older than AdmissionMaxAge.
	if adm.Age(o.cfg.Clock.Now()) > o.cfg.AdmissionMaxAge {
		again, err := o.ledger.ScopeRecheck(ctx, r.Scope, jobID, adm.Verdict == ledger.VerdictProbe, policy)
		if err != nil {
			return err
		}
		if err := s.store.readmit(ctx, attempt, again); err != nil {
			return err
		}
		if !again.Admitted() {
			return river.JobSnooze(untilDeadline(r, now, max(again.Wait, time.Millisecond)))
		}
	}
	res, err := s.target.Deliver(ctx, connector.Delivery{Set: set.ActionSet, Attempt: attempt})
	if errors.Is(err, connector.ErrInvalidDelivery) {
		// The connector refused the set before sending anything: no try
		// will ever take it, so it goes dead now, reviewable, with why.
		s.log.Warn("the CRM connector refused the action set as invalid: dead, reviewable (callscribe outbox list --state dead)",
			slog.String("error", err.Error()))
		return s.store.settle(ctx, StateDead, "invalid_delivery", connector.Result{Class: "invalid_delivery"}, nil, err.Error())
	}
	if err != nil {
		return fmt.Errorf("delivering %s: %w", s.logAttr.Value, err)
	}
	faultPoint("after_crm_applied")
	answer, why = windowOutcome(res), "HTTP "+strconv.Itoa(res.HTTPStatus)+" "+res.Class
	log := s.log.With(slog.String("class", res.Class), slog.Int("status", res.HTTPStatus), slog.Int("attempt", attempt))
	real := res.Outcome != connector.OutcomeThrottled && res.Outcome != connector.OutcomeTransient
	if adm.Verdict == ledger.VerdictProbe && real {
		if err := o.ledger.ScopeProbeSucceeded(ctx, r.Scope, jobID); err != nil {
			return err
		}
	}
	if res.Outcome != connector.OutcomeThrottled {
		// Given back once the scope is open again after a probe, so that
		// the waiters it wakes are admitted.
		settled = true
		o.release(ctx, s, answer, why)
	}
	switch res.Outcome {
	case connector.OutcomeApplied, connector.OutcomeReplayed:
		return s.store.settle(ctx, StateDelivered, "", res, nil, "delivered")
	case connector.OutcomeDead:
		log.Warn("CRM refused the action set: dead, reviewable (callscribe outbox list --state dead)")
		return s.store.settle(ctx, StateDead, "", res, nil, "CRM refused it: "+res.Message)
	case connector.OutcomeThrottled:
		out, err := o.ledger.ScopeDeferralFromSignal(ctx, ledger.ThrottlePolicy{RetryAfter: o.cfg.RetryAfter}, throttleSignal(r.Scope, jobID, attempt, res))
		if err != nil {
			return err
		}
		o.metrics.CRMThrottled(r.Target, r.Scope, res.HTTPStatus)
		// Given back once the scope's deferral is recorded, so that the
		// waiters it wakes are deferred too.
		settled = true
		o.release(ctx, s, answer, why)
		if out.Scope.Moved {
			o.metrics.CRMCooldown(r.Scope, out.NotBefore.Sub(o.cfg.Clock.Now()))
		}
		if out.Scope.Moved && out.NotBefore.After(o.cfg.Clock.Now()) {
			o.cooldown(ctx, r.Scope, why)
		}
		log.Info("CRM throttled; its scope is deferred", slog.String("scope", r.Scope), slog.Time("not_before", out.NotBefore))
		if !out.NotBefore.Before(r.Deadline) {
			return s.store.tooLate(ctx, res, out.NotBefore, log)
		}
		if err := s.store.settle(ctx, StatePending, "", res, &out.NotBefore, "throttled: "+out.Decision.String()); err != nil {
			return err
		}
		at := o.cfg.Clock.Now()
		return river.JobSnooze(untilDeadline(r, at, out.NotBefore.Sub(at)))
	}
	// Transient: this row backs off alone.
	if attempt >= o.cfg.MaxAttempts {
		return s.store.settle(ctx, StateDead, "", res, nil, fmt.Sprintf("gave up after %d tries", attempt))
	}
	d := o.cfg.RetryAfter.Decide("", false, attempt-1)
	if res.RetryAfter != nil && res.HTTPStatus == 503 {
		d = o.cfg.RetryAfter.Decide(*res.RetryAfter, true, attempt-1)
	}
	nb := d.NotBefore
	if !nb.Before(r.Deadline) {
		return s.store.tooLate(ctx, res, nb, log)
	}
	if err := s.store.settle(ctx, StatePending, "", res, &nb, "transient: backing off "+d.Delay.String()); err != nil {
		return err
	}
	return river.JobSnooze(untilDeadline(r, o.cfg.Clock.Now(), d.Delay))
}

// throttleSignal is the timing signal of a CRM's throttled answer to try
// attempt (counted from 1) of an outbox row of scope.
func throttleSignal(scope string, jobID int64, attempt int, res connector.Result) ledger.ThrottleSignal {
	return ledger.ThrottleSignal{
		Scope: scope, Class: res.Class, RetryAfter: res.RetryAfter, Date: res.Date,
		VendorDelay: res.VendorDelay, VendorDelayHeader: res.VendorDelayHeader, VendorDelayRaw: res.VendorDelayRaw,
		DeferUntil: res.DeferUntil, DeferReason: res.DeferReason,
		Attempt: attempt - 1, JobID: jobID,
	}
}
