package dbsqlc

import "github.com/jackc/pgx/v5"

// This file is written by hand, not by sqlc: queries queued on a caller's
// pgx.Batch, so that another package's statement and one of the ledger's
// travel in one round trip and run in one implicit transaction.

// QueueScopeDeferralGetForAdmission queues ScopeDeferralGetForAdmission on
// b; fn receives its row (pgx.ErrNoRows: the scope has no row) when b's
// results are read.
func QueueScopeDeferralGetForAdmission(b *pgx.Batch, scope string, fn func(ScopeDeferral, error)) {
	b.Queue(scopeDeferralGetForAdmission, scope).Query(func(rows pgx.Rows) error {
		fn(pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[ScopeDeferral]))
		return nil
	})
}
