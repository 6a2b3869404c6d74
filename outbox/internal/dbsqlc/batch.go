package dbsqlc

import (
	"errors"

	"github.com/jackc/pgx/v5"
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

// refused is err unless it is pgx.ErrNoRows (a statement that succeeded
// and returned no row).
func refused(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}
