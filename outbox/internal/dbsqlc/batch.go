package dbsqlc

import "github.com/jackc/pgx/v5"

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
