package outbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/crm/connector"
)

// ActionSetsOf lists every committed version of a recording's action set.
func (o *Outbox) ActionSetsOf(ctx context.Context, recordingID uuid.UUID) ([]ActionSet, error) {
	rows, err := o.pool.Query(ctx, qActionSetListByRecording, recordingID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ActionSet, error) { return scanActionSet(r) })
}

// AuditCounts are the sizes of the append-only histories.
type AuditCounts struct {
	LedgerEvents int64
	OutboxEvents int64
	ActionSets   int64
}

// Audit reads AuditCounts.
func (o *Outbox) Audit(ctx context.Context) (AuditCounts, error) {
	var c AuditCounts
	err := o.pool.QueryRow(ctx, qAuditCounts).Scan(&c.LedgerEvents, &c.OutboxEvents, &c.ActionSets)
	return c, err
}

// RedeliverResult is one replayed delivery.
type RedeliverResult struct {
	Set    ActionSet
	Result connector.Result
}

// Redeliver sends a committed action set again to tgt with its original
// idempotency key and records it as an audit event on the set's outbox rows
// (their delivery state does not change). A CRM that keeps crm-webhook/v1's
// promise answers a set it already holds with a replay: no effect.
func (o *Outbox) Redeliver(ctx context.Context, set ActionSet, tgt connector.Target, targetName string) (connector.Result, error) {
	res, err := tgt.Deliver(ctx, connector.Delivery{Set: set.ActionSet, Attempt: 1})
	if err != nil {
		return res, fmt.Errorf("replaying %s to %s: %w", set.IdempotencyKey(), targetName, err)
	}
	if _, err := o.pool.Exec(ctx, qOutboxEventReplay, set.ID, o.cfg.Clock.Now().UTC(), "replay:"+string(res.Outcome), res.Class,
		res.HTTPStatus, res.CRMID, "replayed to "+targetName); err != nil {
		return res, fmt.Errorf("recording the replay of %s: %w", set.IdempotencyKey(), err)
	}
	return res, nil
}
