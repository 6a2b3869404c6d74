package ledger

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// PurgeOpts tunes RetentionPurge.
type PurgeOpts struct {
	// OlderThan: terminal recordings last changed longer ago than this are
	// removed. Default: Config.Retention.
	OlderThan time.Duration
	// BatchSize: recordings removed per transaction. Default: PurgeBatchDefault.
	BatchSize int
	// Reason is recorded with each purge batch. Default: "retention".
	Reason string
}

// PurgeResult counts what RetentionPurge removed.
type PurgeResult struct {
	Cutoff     time.Time
	Recordings int
	Events     int
	Batches    int
}

// RetentionPurge removes whole histories (every event and the row) of
// terminal recordings older than the retention age, in batches of short
// transactions. Each batch is recorded in retention_purges. This is the only
// path by which events are ever deleted; the database refuses every other.
func (l *Ledger) RetentionPurge(ctx context.Context, opts PurgeOpts) (PurgeResult, error) {
	if opts.OlderThan == 0 {
		opts.OlderThan = l.config.Retention
	}
	if opts.OlderThan < 0 {
		return PurgeResult{}, &InvalidError{Field: "OlderThan", Reason: "must be positive"}
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = PurgeBatchDefault
	}
	if opts.BatchSize < 0 {
		return PurgeResult{}, &InvalidError{Field: "BatchSize", Reason: "must be positive"}
	}
	if opts.Reason == "" {
		opts.Reason = "retention"
	}
	now := l.now()
	res := PurgeResult{Cutoff: dbTime(now.Add(-opts.OlderThan))}
	for {
		n, err := l.queries.RetentionPurge(ctx, l.pool, dbsqlc.RetentionPurgeParams{
			Cutoff: res.Cutoff, At: now, MaxRecordings: int32(min(opts.BatchSize, math.MaxInt32)), Reason: opts.Reason,
		})
		if err != nil {
			return res, fmt.Errorf("purging histories older than %s: %w", res.Cutoff.Format(time.RFC3339), translate(err))
		}
		res.Recordings += int(n.RecordingsDeleted)
		res.Events += int(n.EventsDeleted)
		res.Batches++
		if int(n.RecordingsDeleted) < opts.BatchSize {
			return res, nil
		}
	}
}
