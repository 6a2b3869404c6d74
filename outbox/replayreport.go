package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// ReplayRun is a replay run as recorded, with its figures.
type ReplayRun struct {
	ID             int64     `json:"id"`
	Target         string    `json:"target"`
	Scope          string    `json:"scope"`
	TenantID       string    `json:"tenant_id"`
	RecordingState string    `json:"recording_state"`
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	StartedBy      string    `json:"started_by"`
	// MaxRate: the ceiling on sends per second; 0: none.
	MaxRate float64 `json:"max_rate"`
	// DeliveryDeadlineSeconds: how long each delivery may stay pending.
	DeliveryDeadlineSeconds float64 `json:"delivery_deadline_seconds"`
	// State: enumerating, running, done or cancelled.
	State string `json:"state"`
	// Enumerated: recordings of the window enqueued so far.
	Enumerated int64        `json:"recordings_enumerated"`
	Reason     string       `json:"reason"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
	FinishedAt *time.Time   `json:"finished_at"`
	Report     ReplayReport `json:"report"`
}

// Active reports whether the run is still enumerating or running.
func (r ReplayRun) Active() bool { return r.State == RunEnumerating || r.State == RunRunning }

// ReplayReport is what a run did, counted from its own records.
type ReplayReport struct {
	// RecordingsReplayed: recordings re-driven (their committed sets
	// turned into deliveries, unfinished ones re-ingested).
	RecordingsReplayed int64 `json:"recordings_replayed"`
	// AuditEventsAppended: the run's tries (withdrawn ones too) and the audit events its ended
	// deliveries appended to their sets' outbox rows.
	AuditEventsAppended int64 `json:"audit_events_appended"`
	// NewActionVersions: action sets committed since the run began for
	// the calls it replays. Replay never changes business state: 0.
	NewActionVersions int64 `json:"new_action_versions"`
	// Deliveries: action sets of the run; Pending of them not yet settled.
	Deliveries int64 `json:"deliveries"`
	Pending    int64 `json:"pending"`
	// CRMEffectsCreated: deliveries the target applied now (201);
	// AnsweredAsReplays: deliveries it already held (200).
	CRMEffectsCreated int64 `json:"crm_effects_created"`
	AnsweredAsReplays int64 `json:"answered_as_replays"`
	// Throttled and Transient: answers that put a delivery back in line
	// (429 or 503 with Retry-After; 5xx, timeouts, resets), each retried
	// after the scope's deferral or its backoff.
	Throttled int64 `json:"throttled"`
	Transient int64 `json:"transient"`
	// Dead: deliveries that ended unsent or refused (DeadList says why);
	// Cancelled: pending deliveries of a cancelled run.
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
	// Tries: requests sent to the target. Withdrawn: tries recorded, then
	// not sent because the recheck of their aged admission found the
	// scope deferred meanwhile.
	Tries     int64 `json:"tries"`
	Withdrawn int64 `json:"withdrawn"`
	// Sends judges every try by the exact cooldown rule of the speech
	// vendors (ledger.SendChecks): IgnoredKnownCooldown, sends inside a
	// deferral of the target's scope known when they were admitted, is 0.
	Sends ledger.SendCounts `json:"sends"`
	// DeadList: the first dead deliveries, with why.
	DeadList []ReplayDead `json:"dead_list"`
}

// ReplayDead is a dead delivery of a run.
type ReplayDead struct {
	ActionSetID    int64  `json:"action_set_id"`
	IdempotencyKey string `json:"idempotency_key"`
	LastClass      string `json:"last_class"`
	Reason         string `json:"reason"`
}

// replayDeadListMax bounds ReplayReport.DeadList.
const replayDeadListMax = 20

// ReplayRunByID reads a run and its figures, or ErrNotFound.
func (o *Outbox) ReplayRunByID(ctx context.Context, id int64) (ReplayRun, error) {
	return o.replayRun(ctx, id, true)
}

// ReplayProgress is ReplayRunByID without judging the run's tries against
// the scope's cooldowns (Report.Sends zero) and without the dead list: a
// read whose cost does not grow with the run's tries, to follow a run.
func (o *Outbox) ReplayProgress(ctx context.Context, id int64) (ReplayRun, error) {
	return o.replayRun(ctx, id, false)
}

func (o *Outbox) replayRun(ctx context.Context, id int64, judge bool) (ReplayRun, error) {
	r, err := o.queries.ReplayRunGet(ctx, o.pool, id)
	if err != nil {
		return ReplayRun{}, fmt.Errorf("reading replay run %d: %w", id, translate(err))
	}
	run := ReplayRun{ID: r.ID, Target: r.Target, Scope: r.Scope, TenantID: r.TenantID, RecordingState: r.RecordingState,
		From: r.WindowFrom.UTC(), To: r.WindowTo.UTC(), StartedBy: r.StartedBy, MaxRate: r.MaxRate,
		DeliveryDeadlineSeconds: r.DeadlineSeconds, State: r.State, Enumerated: r.Enumerated, Reason: r.Reason,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.FinishedAt != nil {
		f := r.FinishedAt.UTC()
		run.FinishedAt = &f
	}
	rep, err := o.queries.ReplayReport(ctx, o.pool, id)
	if err != nil {
		return run, fmt.Errorf("counting replay run %d: %w", id, translate(err))
	}
	run.Report = ReplayReport{RecordingsReplayed: r.Redriven, AuditEventsAppended: rep.AuditEvents, NewActionVersions: rep.NewActionVersions,
		Deliveries: rep.Deliveries, Pending: rep.Pending, CRMEffectsCreated: rep.Applied, AnsweredAsReplays: rep.Replayed,
		Throttled: rep.Throttled, Transient: rep.Transient, Dead: rep.Dead, Cancelled: rep.Cancelled, Tries: rep.Tries, Withdrawn: rep.Withdrawn,
		DeadList: []ReplayDead{}}
	if !judge {
		return run, nil
	}
	sends, err := o.queries.ReplayTrySends(ctx, o.pool, id)
	if err != nil {
		return run, fmt.Errorf("reading the tries of replay run %d: %w", id, translate(err))
	}
	checks := make([]ledger.Send, len(sends))
	for i, s := range sends {
		checks[i] = ledger.Send{AdmittedSeq: s.AdmittedSeq, AdmittedAt: s.AdmittedAt, SentAt: s.SentAt}
	}
	if run.Report.Sends, err = o.ledger.SendChecks(ctx, run.Scope, checks); err != nil {
		return run, err
	}
	dead, err := o.queries.ReplayDeadList(ctx, o.pool, dbsqlc.ReplayDeadListParams{RunID: id, MaxRows: replayDeadListMax})
	if err != nil {
		return run, fmt.Errorf("listing the dead deliveries of replay run %d: %w", id, translate(err))
	}
	for _, d := range dead {
		run.Report.DeadList = append(run.Report.DeadList, ReplayDead{ActionSetID: d.ActionSetID,
			IdempotencyKey: fmt.Sprintf("%s:%s:%d", d.TenantID, d.CallID, d.ActionVersion), LastClass: d.LastClass, Reason: d.Reason})
	}
	return run, nil
}

// ReplayRuns lists the newest runs (activeOnly: those still enumerating
// or running) with their figures, at most limit (0: 20).
func (o *Outbox) ReplayRuns(ctx context.Context, activeOnly bool, limit int) ([]ReplayRun, error) {
	if limit <= 0 {
		limit = 20
	}
	ids, err := o.queries.ReplayRunList(ctx, o.pool, dbsqlc.ReplayRunListParams{ActiveOnly: activeOnly, MaxRows: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing replay runs: %w", translate(err))
	}
	out := make([]ReplayRun, 0, len(ids))
	for _, id := range ids {
		r, err := o.ReplayRunByID(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ReplayRateSlots lists the rate ceiling's slots a run's tries took,
// earliest first: consecutive slots are at least 1/MaxRate apart.
func (o *Outbox) ReplayRateSlots(ctx context.Context, id int64) ([]time.Time, error) {
	sends, err := o.queries.ReplayTrySends(ctx, o.pool, id)
	if err != nil {
		return nil, fmt.Errorf("reading the tries of replay run %d: %w", id, translate(err))
	}
	var out []time.Time
	for _, s := range sends {
		if s.RateSlot != nil {
			out = append(out, s.RateSlot.UTC())
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out, nil
}
