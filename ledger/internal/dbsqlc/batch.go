package dbsqlc

import "github.com/jackc/pgx/v5"

// This file is written by hand, not by sqlc: queries queued on a caller's
// pgx.Batch, so that another package's statement and one of the ledger's
// travel in one round trip and run in one implicit transaction.

// QueueScopeDeferralGetForAdmission queues ScopeDeferralGetForAdmission on
// b; fn receives its row (pgx.ErrNoRows: the scope has no row) when b's
// results are read.
func QueueScopeDeferralGetForAdmission(b *pgx.Batch, scope string, fn func(ScopeDeferralGetForAdmissionRow, error)) {
	b.Queue(scopeDeferralGetForAdmission, scope).Query(func(rows pgx.Rows) error {
		fn(pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (ScopeDeferralGetForAdmissionRow, error) {
			var i ScopeDeferralGetForAdmissionRow
			d := &i.ScopeDeferral
			err := row.Scan(&d.Scope, &d.NotBefore, &d.UpdatedAt, &d.NeedsProbe, &d.ProbeJobID, &d.ProbeClaimedAt,
				&d.Paused, &d.PausedReason, &d.PausedAt, &d.Seq, &i.DbNow)
			return i, err
		}))
		return nil
	})
}
