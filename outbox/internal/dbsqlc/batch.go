package dbsqlc

import (
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgmerge"
)

// This file is written by hand, not by sqlc: queries queued on a caller's
// pgx.Batch, so that one of the outbox's statements and another package's
// travel in one round trip and run in one implicit transaction.

// QueueOutboxDeliveryGet queues OutboxDeliveryGet on b; fn receives its row
// (pgx.ErrNoRows: no such row) when b's results are read.
func QueueOutboxDeliveryGet(b *pgx.Batch, id int64, fn func(OutboxDeliveryGetRow, error)) {
	b.Queue(outboxDeliveryGet, id).Query(func(rows pgx.Rows) error {
		fn(pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[OutboxDeliveryGetRow]))
		return nil
	})
}

// QueueOutboxTry queues OutboxTry on b; fn receives the row's attempts
// (pgx.ErrNoRows: the row is no longer pending) when b's results are
// read. A statement the database refused makes the batch's Close return
// its error.
func QueueOutboxTry(b *pgx.Batch, arg OutboxTryParams, fn func(int32, error)) {
	b.Queue(outboxTry, arg.At, arg.ID).QueryRow(func(row pgx.Row) error {
		var attempts int32
		err := row.Scan(&attempts)
		fn(attempts, err)
		return refused(err)
	})
}

// QueueOutboxSettle queues OutboxSettle on b; fn receives the settled
// row's id (pgx.ErrNoRows: not pending any more) when b's results are
// read. A statement the database refused makes the batch's Close return
// its error.
func QueueOutboxSettle(b *pgx.Batch, arg OutboxSettleParams, fn func(int64, error)) {
	b.Queue(outboxSettle, arg.At, arg.FromState, arg.State, arg.Outcome, arg.LastClass, arg.HttpStatus, arg.CrmID, arg.RetryAfterRaw,
		arg.Reason, arg.GaugeNames, arg.GaugeValues, arg.RowClass, arg.NotBefore, arg.Deadline, arg.ID).QueryRow(func(row pgx.Row) error {
		var id int64
		err := row.Scan(&id)
		fn(id, err)
		return refused(err)
	})
}

// QueueOutboxTryMany queues OutboxTryMany on b for the tries ps (their
// ids distinct); fns[i] receives row i's attempts, or pgx.ErrNoRows when
// it is no longer pending, when b's results are read. A statement the
// database refused gives every fns[i] its error and makes the batch's
// Close return it.
func QueueOutboxTryMany(b *pgx.Batch, ps []OutboxTryParams, fns []func(int32, error)) {
	ids, ats := make([]int64, len(ps)), make([]time.Time, len(ps))
	for i, p := range ps {
		ids[i], ats[i] = p.ID, p.At
	}
	b.Queue(outboxTryMany, ids, ats).Query(func(rows pgx.Rows) error {
		return pgmerge.Answer(rows, fns, func(rows pgx.Rows) (int32, int32, error) {
			var ord, attempts int32
			err := rows.Scan(&ord, &attempts)
			return ord, attempts, err
		})
	})
}

// QueueOutboxSettleMany queues OutboxSettleMany on b for the settlements
// ps (their ids distinct, none with gauges); fns[i] receives row i's id,
// or pgx.ErrNoRows when it was not in its from_state, when b's results
// are read. A statement the database refused gives every fns[i] its error
// and makes the batch's Close return it.
func QueueOutboxSettleMany(b *pgx.Batch, ps []OutboxSettleParams, fns []func(int64, error)) {
	n := len(ps)
	ids, from, states, crmIDs, rowClasses := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	lastClasses, ats, notBefores, deadlines := make([]string, n), make([]time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	outcomes, statuses, retryAfters, reasons := make([]string, n), make([]int32, n), make([]*string, n), make([]string, n)
	for i, p := range ps {
		ids[i], from[i], states[i], crmIDs[i], rowClasses[i] = p.ID, p.FromState, p.State, p.CrmID, p.RowClass
		lastClasses[i], ats[i], notBefores[i], deadlines[i] = p.LastClass, p.At, p.NotBefore, p.Deadline
		outcomes[i], statuses[i], retryAfters[i], reasons[i] = p.Outcome, p.HttpStatus, p.RetryAfterRaw, p.Reason
	}
	b.Queue(outboxSettleMany, ids, from, states, crmIDs, rowClasses, lastClasses, ats, notBefores, deadlines,
		outcomes, statuses, retryAfters, reasons).Query(func(rows pgx.Rows) error {
		return pgmerge.Answer(rows, fns, func(rows pgx.Rows) (int32, int64, error) {
			var ord int32
			err := rows.Scan(&ord)
			return ord, ids[max(0, min(int(ord)-1, n-1))], err
		})
	})
}

// refused is err unless it is pgx.ErrNoRows (a statement that succeeded
// and returned no row).
func refused(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// actionSetCommit numbers, stores and queues a recording's next action
// set in one statement: its version is the versions the call's other
// recordings committed (ActionSetCountOtherRecordings) plus the
// recording's validations (the ledger's RecordingEventCountValidations,
// whose rule it repeats: sqlc generates only statements on the outbox's
// own tables, hence this one is written here) plus the pending ones;
// with a destination ($8 not NULL) its outbox row goes in with it, keyed
// as crm.ActionSet.IdempotencyKey keys it (tenant:call:version). No row:
// another worker committed that version first (ON CONFLICT DO NOTHING).
const actionSetCommit = `WITH v AS (
    SELECT (SELECT count(*) FROM action_sets
            WHERE tenant_id = $2 AND call_id = $3 AND recording_id <> $1)
         + (SELECT count(*) FROM recording_events
            WHERE recording_id = $1 AND new_state = 'validated' AND prior_state <> 'validated')
         + $4::integer AS version
), s AS (
    INSERT INTO action_sets (recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at)
    SELECT $1, $2, $3, v.version, $5, $6, $7 FROM v
    ON CONFLICT ON CONSTRAINT action_sets_version DO NOTHING
    RETURNING id, action_version, actions, committed_at
), o AS (
    INSERT INTO outbox (action_set_id, target, scope, idempotency_key, created_at, updated_at, deadline, received_at)
    SELECT s.id, $8::text, $9::text, $2::text || ':' || $3::text || ':' || s.action_version, $7, $7, $10, $11::timestamptz
    FROM s WHERE $8::text IS NOT NULL
    RETURNING id, idempotency_key, state, attempts, crm_id, last_class, not_before, created_at, updated_at, deadline, received_at
)
SELECT s.id, s.action_version, o.id, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class, o.not_before,
       o.created_at, o.updated_at, o.deadline, o.received_at, s.actions, s.committed_at
FROM s LEFT JOIN o ON true`

// ActionSetCommitParams are actionSetCommit's arguments: Target nil
// stores the set without an outbox row.
type ActionSetCommitParams struct {
	RecordingID        uuid.UUID
	TenantID, CallID   string
	PendingValidations int32
	RecordingSha256    string
	Actions            []byte
	CommittedAt        time.Time
	Target, Scope      *string
	Deadline           time.Time
	ReceivedAt         *time.Time
}

// ActionSetCommitRow is what actionSetCommit stored: the set's id and
// version, and its outbox row's id (nil: no destination) with the row as
// OutboxDeliveryGet reads it (Delivery; nil without one), the columns the
// statement did not set read back from the row it inserted.
type ActionSetCommitRow struct {
	ID            int64
	ActionVersion int32
	OutboxID      *int64
	Delivery      *OutboxDeliveryGetRow
}

// QueueActionSetCommit queues actionSetCommit on b; fn receives its row
// (pgx.ErrNoRows: the version was committed first) when b's results are
// read. A statement the database refused makes the batch's Close return
// its error.
func QueueActionSetCommit(b *pgx.Batch, arg ActionSetCommitParams, fn func(ActionSetCommitRow, error)) {
	b.Queue(actionSetCommit, arg.RecordingID, arg.TenantID, arg.CallID, arg.PendingValidations, arg.RecordingSha256, arg.Actions,
		arg.CommittedAt, arg.Target, arg.Scope, arg.Deadline, arg.ReceivedAt).QueryRow(func(row pgx.Row) error {
		var i ActionSetCommitRow
		var key, state, crmID, lastClass *string
		var attempts *int32
		var notBefore, createdAt, updatedAt, deadline, receivedAt *time.Time
		var d OutboxDeliveryGetRow
		err := row.Scan(&i.ID, &i.ActionVersion, &i.OutboxID, &key, &state, &attempts, &crmID, &lastClass, &notBefore,
			&createdAt, &updatedAt, &deadline, &receivedAt, &d.Actions, &d.CommittedAt)
		if err == nil && i.OutboxID != nil {
			d.ID, d.ActionSetID, d.Target, d.Scope = *i.OutboxID, i.ID, *arg.Target, *arg.Scope
			d.IdempotencyKey, d.State, d.Attempts, d.CrmID, d.LastClass = *key, *state, *attempts, *crmID, *lastClass
			d.NotBefore, d.CreatedAt, d.UpdatedAt, d.Deadline, d.ReceivedAt = notBefore, *createdAt, *updatedAt, *deadline, receivedAt
			d.RecordingID, d.TenantID, d.CallID, d.ActionVersion, d.RecordingSha256 = arg.RecordingID, arg.TenantID, arg.CallID,
				i.ActionVersion, arg.RecordingSha256
			i.Delivery = &d
		}
		fn(i, err)
		return refused(err)
	})
}
