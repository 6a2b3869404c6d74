package dbsqlc

import (
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgmerge"
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

// QueueRecordingTransitionMany queues RecordingTransitionMany on b for
// the moves ps (their ids distinct); fns[i] receives move i's row, or
// pgx.ErrNoRows when its compare-and-set matched no row, when b's results
// are read. A statement the database refused gives every fns[i] its error
// and makes the batch's Close return it.
func QueueRecordingTransitionMany(b *pgx.Batch, ps []RecordingTransitionParams, fns []func(RecordingTransitionRow, error)) {
	n := len(ps)
	ids, from, to := make([]uuid.UUID, n), make([]string, n), make([]string, n)
	incs, ats := make([]int32, n), make([]time.Time, n)
	providers, providerIDs, retryAfters := make([]*string, n), make([]*string, n), make([]*string, n)
	notBefores, deadlines := make([]*time.Time, n), make([]*time.Time, n)
	reasons, classes, details := make([]string, n), make([]string, n), make([][]byte, n)
	for i, p := range ps {
		ids[i], from[i], to[i], incs[i], ats[i] = p.ID, p.FromState, p.ToState, p.AttemptInc, p.At
		providers[i], providerIDs[i], retryAfters[i] = p.Provider, p.ProviderID, p.RetryAfterRaw
		notBefores[i], deadlines[i] = p.NotBefore, p.Deadline
		reasons[i], classes[i], details[i] = p.Reason, p.ResponseClass, p.Detail
	}
	b.Queue(recordingTransitionMany, ids, from, to, incs, ats, providers, providerIDs, notBefores, deadlines,
		reasons, classes, retryAfters, details).Query(func(rows pgx.Rows) error {
		return pgmerge.Answer(rows, fns, func(rows pgx.Rows) (int32, RecordingTransitionRow, error) {
			ord, r, err := scanMoved(rows)
			return ord, RecordingTransitionRow(r), err
		})
	})
}

// QueueRecordingAdvanceMany queues RecordingAdvanceMany on b for the
// moves ps (their ids distinct); fns[i] receives move i's row, or
// pgx.ErrNoRows when its compare-and-set matched no row, when b's results
// are read. A statement the database refused gives every fns[i] its error
// and makes the batch's Close return it.
func QueueRecordingAdvanceMany(b *pgx.Batch, ps []RecordingAdvanceParams, fns []func(RecordingAdvanceRow, error)) {
	n := len(ps)
	ids, from, to, incs, counts, ats := make([]uuid.UUID, n), make([]string, n), make([]string, n), make([]int32, n), make([]int32, n), make([]time.Time, n)
	providerIDs := make([]*string, n)
	var stepItems, seqBacks, attemptBacks []int32
	var priors, news, reasons, classes []string
	var details [][]byte
	var trItems []int32
	var trProviders, trVendorIDs, trTexts, trLanguages []string
	var trConfidences, trDurations []float64
	var trSegments [][]byte
	for i, p := range ps {
		ids[i], from[i], to[i], incs[i], counts[i], ats[i] = p.ID, p.FromState, p.ToState, p.AttemptInc, int32(len(p.PriorStates)), p.At
		providerIDs[i] = p.ProviderID
		for k := range p.PriorStates {
			stepItems = append(stepItems, int32(i+1))
			seqBacks, attemptBacks = append(seqBacks, p.SeqBacks[k]), append(attemptBacks, p.AttemptBacks[k])
			priors, news = append(priors, p.PriorStates[k]), append(news, p.NewStates[k])
			reasons, classes, details = append(reasons, p.Reasons[k]), append(classes, p.ResponseClasses[k]), append(details, p.Details[k])
		}
		if p.WithTranscript {
			trItems = append(trItems, int32(i+1))
			trProviders, trVendorIDs = append(trProviders, p.TrProvider), append(trVendorIDs, p.TrVendorID)
			trTexts, trLanguages = append(trTexts, p.TrText), append(trLanguages, p.TrLanguage)
			trConfidences, trDurations = append(trConfidences, p.TrConfidence), append(trDurations, p.TrDurationSeconds)
			trSegments = append(trSegments, p.TrSegments)
		}
	}
	b.Queue(recordingAdvanceMany, ids, from, to, incs, counts, ats, providerIDs,
		stepItems, seqBacks, attemptBacks, priors, news, reasons, classes, details,
		nonNil(trItems), nonNil(trProviders), nonNil(trVendorIDs), nonNil(trTexts), nonNil(trLanguages),
		nonNil(trConfidences), nonNil(trDurations), nonNil(trSegments)).Query(func(rows pgx.Rows) error {
		return pgmerge.Answer(rows, fns, func(rows pgx.Rows) (int32, RecordingAdvanceRow, error) {
			ord, r, err := scanMoved(rows)
			return ord, RecordingAdvanceRow(r), err
		})
	})
}

// scanMoved scans a row of RecordingTransitionMany or
// RecordingAdvanceMany: the item's place, then the moved recording.
func scanMoved(rows pgx.Rows) (int32, Recording, error) {
	var ord int32
	var i Recording
	err := rows.Scan(&ord, &i.ID, &i.TenantID, &i.CallID, &i.AudioSha256, &i.BusinessKey, &i.State, &i.Attempt, &i.Lane, &i.AudioUri,
		&i.AudioBytes, &i.Deadline, &i.CreatedAt, &i.UpdatedAt, &i.LastEventSeq, &i.Provider, &i.ProviderID, &i.Model,
		&i.Language, &i.NotBefore, &i.StartedAt, &i.AudioDurationMs)
	return ord, i, err
}

// nonNil is xs, or an empty slice for nil: an empty array, not NULL.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
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
