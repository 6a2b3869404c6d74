package outbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// ActionSetsOf lists every committed version of a recording's action set.
func (o *Outbox) ActionSetsOf(ctx context.Context, recordingID uuid.UUID) ([]ActionSet, error) {
	rows, err := o.queries.ActionSetListByRecording(ctx, o.pool, recordingID)
	if err != nil {
		return nil, fmt.Errorf("listing action sets of %s: %w", recordingID, translate(err))
	}
	out := make([]ActionSet, len(rows))
	for i, r := range rows {
		if out[i], err = actionSetFrom(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AuditCounts are the sizes of the append-only histories.
type AuditCounts struct {
	LedgerEvents int64
	OutboxEvents int64
	ActionSets   int64
}

// Audit reads AuditCounts: the ledger's through the ledger, then the
// outbox's own.
func (o *Outbox) Audit(ctx context.Context) (AuditCounts, error) {
	ledgerEvents, err := o.ledger.EventCount(ctx)
	if err != nil {
		return AuditCounts{}, err
	}
	c, err := o.queries.OutboxAuditCount(ctx, o.pool)
	if err != nil {
		return AuditCounts{}, fmt.Errorf("counting outbox history: %w", translate(err))
	}
	return AuditCounts{LedgerEvents: ledgerEvents, OutboxEvents: c.OutboxEvents, ActionSets: c.ActionSets}, nil
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
	if err := o.queries.OutboxEventReplay(ctx, o.pool, dbsqlc.OutboxEventReplayParams{
		ActionSetID: set.ID, At: dbTime(o.cfg.Clock.Now()), Outcome: "replay:" + string(res.Outcome), ResponseClass: res.Class,
		HttpStatus: int32(res.HTTPStatus), CrmID: res.CRMID, Reason: "replayed to " + targetName,
	}); err != nil {
		return res, fmt.Errorf("recording the replay of %s: %w", set.IdempotencyKey(), translate(err))
	}
	return res, nil
}
