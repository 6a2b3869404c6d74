package outbox

import (
	"context"
	"fmt"
	"time"
)

// Depths is the outbox's backlog at a moment: what its gauges report.
type Depths struct {
	// Pending: rows pending delivery (StatePending).
	Pending int64
	// Dead: rows given up (StateDead), reviewable.
	Dead int64
	// OldestPendingAge: how long before the moment read the oldest
	// pending row was committed; 0 when none is pending, never negative.
	OldestPendingAge time.Duration
}

// Depths reads the pending and dead rows and the age at at of the oldest
// pending one. One query.
func (o *Outbox) Depths(ctx context.Context, at time.Time) (Depths, error) {
	r, err := o.queries.OutboxDepths(ctx, o.pool, at)
	if err != nil {
		return Depths{}, fmt.Errorf("reading the pending and dead deliveries: %w", translate(err))
	}
	return Depths{Pending: r.Pending, Dead: r.Dead, OldestPendingAge: max(time.Duration(r.OldestPendingSeconds*float64(time.Second)), 0)}, nil
}
