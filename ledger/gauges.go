package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// OldestEligible reads, for every lane (Lanes), how long before at the
// oldest recording waiting to be submitted was received: a recording
// eligible, or in retry_wait with its not_before passed at at. It is 0
// for a lane where none waits, and never negative. One query.
func (l *Ledger) OldestEligible(ctx context.Context, at time.Time) (map[Lane]time.Duration, error) {
	lanes := Lanes()
	names := make([]string, len(lanes))
	for i, lane := range lanes {
		names[i] = string(lane)
	}
	rows, err := l.queries.RecordingOldestWaitingByLane(ctx, l.pool, dbsqlc.RecordingOldestWaitingByLaneParams{At: at, Lanes: names})
	if err != nil {
		return nil, fmt.Errorf("reading the oldest eligible recording of each lane: %w", translate(err))
	}
	out := make(map[Lane]time.Duration, len(rows))
	for _, r := range rows {
		out[Lane(r.Lane)] = max(time.Duration(r.AgeSeconds*float64(time.Second)), 0)
	}
	return out, nil
}

// ScopeCounts is how many throttling scopes are held back at a moment.
type ScopeCounts struct {
	// Cooling: scopes whose deadline is still ahead, not paused.
	Cooling int64
	// Paused: scopes paused until an operator resumes them.
	Paused int64
}

// ScopeCounts counts the throttling scopes cooling down at at and those
// paused. One query.
func (l *Ledger) ScopeCounts(ctx context.Context, at time.Time) (ScopeCounts, error) {
	r, err := l.queries.ScopeDeferralCounts(ctx, l.pool, at)
	if err != nil {
		return ScopeCounts{}, fmt.Errorf("counting the scopes cooling down and paused: %w", translate(err))
	}
	return ScopeCounts{Cooling: r.Cooling, Paused: r.Paused}, nil
}

// BatchCounts is the batch lane at a glance.
type BatchCounts struct {
	// Manifests counts the manifests in each state; a state with none is
	// absent.
	Manifests map[ManifestState]int64
	// Items counts the manifests' items in each state; a state with none
	// is absent.
	Items map[ItemState]int64
	// PartialCompletions: manifests done that did not complete every item
	// on their own (an item failed, was sent back or dropped).
	PartialCompletions int64
}

// BatchCounts counts the batch lane's manifests and items by state, and
// its partial completions. One query.
func (l *Ledger) BatchCounts(ctx context.Context) (BatchCounts, error) {
	rows, err := l.queries.BatchLaneCounts(ctx, l.pool)
	if err != nil {
		return BatchCounts{}, fmt.Errorf("counting the batch lane's manifests and items: %w", translate(err))
	}
	out := BatchCounts{Manifests: map[ManifestState]int64{}, Items: map[ItemState]int64{}}
	for _, r := range rows {
		switch r.Kind {
		case "manifest":
			out.Manifests[ManifestState(r.State)] = r.N
		case "item":
			out.Items[ItemState(r.State)] = r.N
		case "partial":
			out.PartialCompletions = r.N
		default:
			return BatchCounts{}, fmt.Errorf("counting the batch lane: a row of unknown kind %q", r.Kind)
		}
	}
	return out, nil
}
