package dbsqlc

import (
	"errors"

	"github.com/jackc/pgx/v5"
)

// This file is written by hand, not by sqlc: queries queued on a caller's
// pgx.Batch, so that another package's statement and one of the ledger's
// travel in one round trip and run in one implicit transaction.

// QueueScopeDeferralReadLock queues ScopeDeferralReadLock on b, to go
// before a read of the scope's deferral in the same batch (one implicit
// transaction, or the caller's): the read then waits for an extension being
// written. Its error, if any, is b's Close's.
func QueueScopeDeferralReadLock(b *pgx.Batch, scope string) {
	b.Queue(scopeDeferralReadLock, scope)
}

// QueueRecordingGetWithScope queues RecordingGetWithScope on b; fn
// receives its row (pgx.ErrNoRows: no such recording) when b's results are
// read.
func QueueRecordingGetWithScope(b *pgx.Batch, arg RecordingGetWithScopeParams, fn func(RecordingGetWithScopeRow, error)) {
	b.Queue(recordingGetWithScope, arg.Scope, arg.ID).QueryRow(func(row pgx.Row) error {
		var i RecordingGetWithScopeRow
		r := &i.Recording
		err := row.Scan(&r.ID, &r.TenantID, &r.CallID, &r.AudioSha256, &r.BusinessKey, &r.State, &r.Attempt, &r.Lane, &r.AudioUri,
			&r.AudioBytes, &r.Deadline, &r.CreatedAt, &r.UpdatedAt, &r.LastEventSeq, &r.Provider, &r.ProviderID, &r.Model,
			&r.Language, &r.NotBefore, &r.StartedAt, &r.AudioDurationMs,
			&i.DScope, &i.DNotBefore, &i.DUpdatedAt, &i.DNeedsProbe, &i.DProbeJobID, &i.DProbeClaimedAt, &i.DPaused,
			&i.DPausedReason, &i.DPausedAt, &i.DSeq, &i.DbNow)
		fn(i, err)
		return nil
	})
}

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

// QueueRecordingTransition queues RecordingTransition on b; fn receives
// its row (pgx.ErrNoRows: the compare-and-set matched no row) when b's
// results are read. A statement the database refused makes the batch's
// Close return its error.
func QueueRecordingTransition(b *pgx.Batch, arg RecordingTransitionParams, fn func(RecordingTransitionRow, error)) {
	b.Queue(recordingTransition, arg.ToState, arg.AttemptInc, arg.At, arg.Provider, arg.ProviderID, arg.NotBefore, arg.Deadline,
		arg.ID, arg.FromState, arg.Reason, arg.ResponseClass, arg.RetryAfterRaw, arg.Detail).QueryRow(func(row pgx.Row) error {
		var i RecordingTransitionRow
		err := row.Scan(&i.ID, &i.TenantID, &i.CallID, &i.AudioSha256, &i.BusinessKey, &i.State, &i.Attempt, &i.Lane, &i.AudioUri,
			&i.AudioBytes, &i.Deadline, &i.CreatedAt, &i.UpdatedAt, &i.LastEventSeq, &i.Provider, &i.ProviderID, &i.Model,
			&i.Language, &i.NotBefore, &i.StartedAt, &i.AudioDurationMs)
		fn(i, err)
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

// QueueRecordingAdvance queues RecordingAdvance on b; fn receives its row
// (pgx.ErrNoRows: the compare-and-set matched no row) when b's results
// are read. A statement the database refused makes the batch's Close
// return its error.
func QueueRecordingAdvance(b *pgx.Batch, arg RecordingAdvanceParams, fn func(RecordingAdvanceRow, error)) {
	b.Queue(recordingAdvance, arg.AttemptBacks, arg.SeqBacks, arg.ToState, arg.AttemptInc, arg.At, arg.PriorStates, arg.ProviderID,
		arg.ID, arg.FromState, arg.NewStates, arg.Reasons, arg.ResponseClasses, arg.Details, arg.TrProvider, arg.TrVendorID,
		arg.TrText, arg.TrLanguage, arg.TrConfidence, arg.TrDurationSeconds, arg.TrSegments, arg.WithTranscript).QueryRow(func(row pgx.Row) error {
		var i RecordingAdvanceRow
		err := row.Scan(&i.ID, &i.TenantID, &i.CallID, &i.AudioSha256, &i.BusinessKey, &i.State, &i.Attempt, &i.Lane, &i.AudioUri,
			&i.AudioBytes, &i.Deadline, &i.CreatedAt, &i.UpdatedAt, &i.LastEventSeq, &i.Provider, &i.ProviderID, &i.Model,
			&i.Language, &i.NotBefore, &i.StartedAt, &i.AudioDurationMs)
		fn(i, err)
		return refused(err)
	})
}
