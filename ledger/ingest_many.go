package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// IngestManyOptions tunes IngestManyTx.
type IngestManyOptions struct {
	// EligibleReason is the reason of each new recording's second event,
	// received → eligible (IngestManyTx writes a new recording born
	// eligible, with its received event and that one). Default "":
	// EligibleReasonDefault.
	EligibleReason string
}

// EligibleReasonDefault is IngestManyOptions.EligibleReason's default.
const EligibleReasonDefault = "ready for admission"

// IngestManyResult is one recording's part of IngestManyTx: what Ingest
// would have returned for it, or why it was refused.
type IngestManyResult struct {
	IngestResult
	// Err is an *InvalidError when this NewRecording was refused; nothing
	// was written for it. Nil otherwise.
	Err error
}

// IngestManyTx is IngestTx for many recordings in the caller's
// transaction, with a fixed number of statements whatever their number:
// one to lock their calls, one to read the calls' recordings, and one to
// insert every new row born eligible, with its two events: received, and
// received → eligible (opts.EligibleReason).
//
// It converges on the business key as IngestTx does, within the slice too:
// a recording given twice is created once and the second result is the
// created row with Created false. A call given with a second digest, in the
// ledger or earlier in the slice, is flagged CallIDReused. The results are
// in the order of ns; an invalid NewRecording gets its Err and the others
// are written. The returned error is one of the transaction's statements
// failing: the caller rolls back.
func (l *Ledger) IngestManyTx(ctx context.Context, tx pgx.Tx, ns []NewRecording, opts IngestManyOptions) ([]IngestManyResult, error) {
	out := make([]IngestManyResult, len(ns))
	valid := make([]NewRecording, len(ns))
	type call struct{ tenant, call string }
	var lockTenants, lockCalls []string
	seenCall := map[call]bool{}
	for i, n := range ns {
		if err := n.normalize(); err != nil {
			out[i].Err = err
			continue
		}
		valid[i] = n
		if c := (call{n.TenantID, n.CallID}); !seenCall[c] {
			seenCall[c] = true
			lockTenants, lockCalls = append(lockTenants, n.TenantID), append(lockCalls, n.CallID)
		}
	}
	if len(lockTenants) == 0 {
		return out, nil
	}
	// Serialise with every other ingest of these calls, so that a second
	// digest always sees the first and is flagged.
	if err := l.queries.RecordingLockCalls(ctx, tx, dbsqlc.RecordingLockCallsParams{TenantIds: lockTenants, CallIds: lockCalls}); err != nil {
		return nil, fmt.Errorf("ingesting %d recordings: locking their calls: %w", len(ns), translate(err))
	}
	known, err := l.queries.RecordingListByCalls(ctx, tx, dbsqlc.RecordingListByCallsParams{TenantIds: lockTenants, CallIds: lockCalls})
	if err != nil {
		return nil, fmt.Errorf("ingesting %d recordings: reading their calls' recordings: %w", len(ns), translate(err))
	}
	type earlier struct {
		ID     uuid.UUID `json:"id"`
		Digest string    `json:"audio_sha256"`
	}
	byKey := map[string]int{} // business key -> index into rows
	rows := make([]Recording, 0, len(known)+len(ns))
	prev := map[call][]earlier{}
	for _, r := range known {
		rec := recordingFrom(r)
		byKey[rec.BusinessKey] = len(rows)
		rows = append(rows, rec)
		c := call{rec.TenantID, rec.CallID}
		prev[c] = append(prev[c], earlier{ID: rec.ID, Digest: rec.AudioSHA256})
	}

	at := l.now()
	var p dbsqlc.RecordingInsertBatchEligibleParams
	rowOf := make([]int, len(ns)) // index into rows of each valid item's recording
	for i, n := range ns {
		if out[i].Err != nil {
			continue
		}
		n = valid[i]
		key := BusinessKey(n.TenantID, n.CallID, n.AudioSHA256)
		if j, ok := byKey[key]; ok {
			rowOf[i] = j
			continue
		}
		c := call{n.TenantID, n.CallID}
		reason := "ingested"
		detail := map[string]any{}
		if n.Route != nil {
			detail["route"] = n.Route
		}
		res := IngestResult{Created: true}
		if ps := prev[c]; len(ps) > 0 {
			reason = "call_id already ingested with a different audio digest; kept as a new recording"
			detail["call_id_reused"] = true
			detail["earlier_recordings"] = ps
			res.CallIDReused = true
			for _, e := range ps {
				res.EarlierRecordings = append(res.EarlierRecordings, e.ID)
			}
		}
		rawDetail, err := detailJSON(detail)
		if err != nil {
			return nil, fmt.Errorf("ingesting %s: %w", n.CallID, err)
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("ingesting %s: new id: %w", n.CallID, err)
		}
		out[i].IngestResult = res
		rowOf[i] = len(rows)
		byKey[key] = len(rows)
		rows = append(rows, born(id, n, at))
		prev[c] = append(prev[c], earlier{ID: id, Digest: n.AudioSHA256})

		p.Ids = append(p.Ids, id)
		p.TenantIds = append(p.TenantIds, n.TenantID)
		p.CallIds = append(p.CallIds, n.CallID)
		p.AudioSha256s = append(p.AudioSha256s, n.AudioSHA256)
		p.Lanes = append(p.Lanes, string(n.Lane))
		p.AudioUris = append(p.AudioUris, n.AudioURI)
		p.AudioBytes = append(p.AudioBytes, n.AudioBytes)
		p.Deadlines = append(p.Deadlines, zeroOrDBTime(n.Deadline))
		p.Models = append(p.Models, n.Model)
		p.Languages = append(p.Languages, n.Language)
		p.StartedAts = append(p.StartedAts, zeroOrDBTime(n.StartedAt))
		p.AudioDurationMs = append(p.AudioDurationMs, n.AudioDuration.Milliseconds())
		p.Reasons = append(p.Reasons, reason)
		p.Details = append(p.Details, string(rawDetail))
	}
	if len(p.Ids) > 0 {
		p.At = at
		p.EligibleReason = opts.EligibleReason
		if p.EligibleReason == "" {
			p.EligibleReason = EligibleReasonDefault
		}
		// Born eligible, with both events (migration 00010): one
		// statement instead of an insert and an update. It returns the
		// count only: each row is what born built from the same values.
		inserted, err := l.queries.RecordingInsertBatchEligible(ctx, tx, p)
		if err != nil {
			return nil, fmt.Errorf("ingesting %d recordings: %w", len(p.Ids), translate(err))
		}
		if inserted != int64(len(p.Ids)) {
			return nil, fmt.Errorf("ingesting %d recordings: the database inserted %d", len(p.Ids), inserted)
		}
	}
	for i := range ns {
		if out[i].Err == nil {
			out[i].Recording = rows[rowOf[i]]
		}
	}
	return out, nil
}

// born is the row RecordingInsertBatchEligible writes for n, with id, at
// the ledger time at (already as the database stores it): the columns it
// sets from n, NULL for a zero deadline, start or duration, state eligible
// at seq 2, attempt 0, no provider yet. TestIngestManyTxReturnsTheStoredRows
// holds it to the row read back.
func born(id uuid.UUID, n NewRecording, at time.Time) Recording {
	return recordingFrom(dbsqlc.Recording{
		ID: id, TenantID: n.TenantID, CallID: n.CallID, AudioSha256: n.AudioSHA256,
		BusinessKey: new(BusinessKey(n.TenantID, n.CallID, n.AudioSHA256)),
		State:       string(StateEligible), Lane: string(n.Lane), AudioUri: n.AudioURI, AudioBytes: n.AudioBytes,
		Deadline: pgtime.WriteOrNull(n.Deadline), CreatedAt: at, UpdatedAt: at, LastEventSeq: 2,
		Model: n.Model, Language: n.Language, StartedAt: pgtime.WriteOrNull(n.StartedAt),
		AudioDurationMs: nonZero(n.AudioDuration.Milliseconds()),
	})
}

// zeroOrDBTime is t as the database stores it, or the zero time (which
// RecordingInsertBatchEligible stores as NULL).
func zeroOrDBTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return pgtime.Write(t)
}
