package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/crm/target"
	"github.com/callscribe/callscribe/ledger"
)

// Delivery states of an outbox row.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateDead      = "dead"
)

// Row is an outbox row.
type Row struct {
	ID             int64
	ActionSetID    int64
	Target         string
	Scope          string
	IdempotencyKey string
	State          string
	Attempts       int
	CRMID          string
	LastClass      string
	NotBefore      time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	TenantID       string
	CallID         string
}

func scanRow(row pgx.Row) (Row, error) {
	var r Row
	var nb *time.Time
	err := row.Scan(&r.ID, &r.ActionSetID, &r.Target, &r.Scope, &r.IdempotencyKey, &r.State, &r.Attempts, &r.CRMID, &r.LastClass,
		&nb, &r.CreatedAt, &r.UpdatedAt, &r.TenantID, &r.CallID)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ledger.ErrNotFound
	}
	if nb != nil {
		r.NotBefore = nb.UTC()
	}
	return r, err
}

// Rows lists outbox rows, oldest first; state "" = any.
func (o *Outbox) Rows(ctx context.Context, state string, limit int) ([]Row, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := o.pool.Query(ctx, qOutboxList, state, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) { return scanRow(r) })
}

// RowByID reads one outbox row.
func (o *Outbox) RowByID(ctx context.Context, id int64) (Row, error) {
	return scanRow(o.pool.QueryRow(ctx, qOutboxGet, id))
}

// Event is one delivery try (or operator action) of an outbox row.
type Event struct {
	Attempt       int
	At            time.Time
	Prior, New    string
	Outcome       string
	ResponseClass string
	HTTPStatus    int
	CRMID         string
	RetryAfter    *string
	Reason        string
}

// Events lists a row's history, oldest first.
func (o *Outbox) Events(ctx context.Context, id int64) ([]Event, error) {
	rows, err := o.pool.Query(ctx, qOutboxEventList, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.Attempt, &e.At, &e.Prior, &e.New, &e.Outcome, &e.ResponseClass, &e.HTTPStatus, &e.CRMID, &e.RetryAfter, &e.Reason)
		return e, err
	})
}

// Retry moves a dead row back to pending and enqueues its delivery, with an
// event saying so.
func (o *Outbox) Retry(ctx context.Context, id int64) error {
	now := o.cfg.Clock.Now().UTC()
	return pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		var got int64
		err := tx.QueryRow(ctx, qOutboxSettle, id, StatePending, "", "operator", now, nil, StateDead, "retry", 0, nil, "operator retry").Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("outbox row %d is not dead: only dead rows can be retried", id)
		}
		if err != nil {
			return err
		}
		jr, err := o.client.InsertTx(ctx, tx, DeliverArgs{OutboxID: id}, nil)
		if err != nil || !jr.UniqueSkippedAsDuplicate {
			return err
		}
		// The row's last job still counts as active: River marks a job
		// completed only after its Work returned.
		if jr.Job.State == rivertype.JobStateRunning {
			return fmt.Errorf("outbox row %d: %w", id, ErrJobRunning)
		}
		_, err = o.client.JobRetryTx(ctx, tx, jr.Job.ID)
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
	return w.o.deliver(ctx, job.ID, job.Args.OutboxID)
}

// settle records a try's outcome and the row's new state in one statement.
func (o *Outbox) settle(ctx context.Context, r Row, state string, res target.Result, notBefore *time.Time, reason string) error {
	var got int64
	err := o.pool.QueryRow(ctx, qOutboxSettle, r.ID, state, res.CRMID, res.Class, o.cfg.Clock.Now().UTC(), notBefore, StatePending,
		string(res.Outcome), res.HTTPStatus, res.RetryAfter, reason).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // settled meanwhile by another try
	}
	return err
}

// deliver is one try: admission to the CRM's scope, the call holding
// nothing, and the outcome recorded.
func (o *Outbox) deliver(ctx context.Context, jobID, id int64) error {
	r, err := o.RowByID(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if r.State != StatePending {
		return nil
	}
	now := o.cfg.Clock.Now()
	if wait := r.NotBefore.Sub(now); wait > 0 {
		return river.JobSnooze(wait)
	}
	dest, ok := o.cfg.Destinations[r.TenantID]
	if !ok || dest.Target == nil {
		return o.settle(ctx, r, StateDead, target.Result{Outcome: target.OutcomeDead, Class: "config"}, nil,
			fmt.Sprintf("tenant %s has no CRM target configured", r.TenantID))
	}
	adm, err := o.ledger.ScopeAdmitWait(ctx, r.Scope, jobID, ledger.AdmitPolicy{
		ProbeTimeout: o.cfg.ProbeTimeout, ProbeWait: o.cfg.ProbeWait, Clock: o.cfg.Clock})
	if err != nil {
		return err
	}
	if !adm.Admitted() {
		return river.JobSnooze(adm.Wait)
	}
	set, err := o.actionSet(ctx, r.ActionSetID)
	if err != nil {
		return err
	}
	var attempt int
	if err := o.pool.QueryRow(ctx, qOutboxTry, r.ID, now.UTC()).Scan(&attempt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	}
	res, err := dest.Target.Deliver(ctx, target.Delivery{Set: set.ActionSet, Attempt: attempt})
	if err != nil {
		return fmt.Errorf("delivering outbox row %d: %w", r.ID, err)
	}
	faultPoint("after_crm_applied")
	for name, v := range res.Gauges {
		// The CRM's own usage figures (Sforce-Limit-Info, HubSpot remaining
		// calls), kept as gauges for operators.
		if _, err := o.pool.Exec(ctx, qGaugeSet, name, int64(v)); err != nil {
			return err
		}
	}
	log := o.cfg.Logger.With(slog.Int64("outbox", r.ID), slog.String("class", res.Class), slog.Int("status", res.HTTPStatus), slog.Int("attempt", attempt))
	real := res.Outcome != target.OutcomeThrottled && res.Outcome != target.OutcomeTransient
	if adm.Verdict == ledger.VerdictProbe && real {
		if err := o.ledger.ScopeProbeSucceeded(ctx, r.Scope, jobID); err != nil {
			return err
		}
	}
	switch res.Outcome {
	case target.OutcomeApplied, target.OutcomeReplayed:
		return o.settle(ctx, r, StateDelivered, res, nil, "delivered")
	case target.OutcomeDead:
		log.Warn("CRM refused the action set: dead, reviewable (callscribe outbox list --state dead)")
		return o.settle(ctx, r, StateDead, res, nil, "CRM refused it: "+res.Message)
	case target.OutcomeThrottled:
		out, err := o.ledger.ScopeDeferralFromSignal(ctx, ledger.ThrottlePolicy{RetryAfter: o.cfg.RetryAfter}, throttleSignal(r.Scope, jobID, attempt, res))
		if err != nil {
			return err
		}
		log.Info("CRM throttled; its scope is deferred", slog.String("scope", r.Scope), slog.Time("not_before", out.NotBefore))
		if err := o.settle(ctx, r, StatePending, res, &out.NotBefore, "throttled: "+out.Decision.String()); err != nil {
			return err
		}
		return river.JobSnooze(out.NotBefore.Sub(o.cfg.Clock.Now()))
	}
	// Transient: this row backs off alone.
	if attempt >= o.cfg.MaxAttempts {
		return o.settle(ctx, r, StateDead, res, nil, fmt.Sprintf("gave up after %d tries", attempt))
	}
	d := o.cfg.RetryAfter.Decide("", false, attempt-1)
	if res.RetryAfter != nil && res.HTTPStatus == 503 {
		d = o.cfg.RetryAfter.Decide(*res.RetryAfter, true, attempt-1)
	}
	nb := d.NotBefore
	if err := o.settle(ctx, r, StatePending, res, &nb, "transient: backing off "+d.Delay.String()); err != nil {
		return err
	}
	return river.JobSnooze(d.Delay)
}

// throttleSignal is the timing signal of a CRM's throttled answer to try
// attempt (counted from 1) of an outbox row of scope.
func throttleSignal(scope string, jobID int64, attempt int, res target.Result) ledger.ThrottleSignal {
	return ledger.ThrottleSignal{
		Scope: scope, Class: res.Class, RetryAfter: res.RetryAfter,
		VendorDelay: res.VendorDelay, VendorDelayHeader: res.VendorDelayHeader, VendorDelayRaw: res.VendorDelayRaw,
		DeferUntil: res.DeferUntil, DeferReason: res.DeferReason,
		Attempt: attempt - 1, JobID: jobID,
	}
}
