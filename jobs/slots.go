package jobs

import (
	"context"
	"log/slog"
	"time"
)

// CapacityWaitDefault is Deps.SlotWait's default: how long a job waits
// before asking again when its vendor has no free slot.
const CapacityWaitDefault = 2 * time.Second

// Slots is the vendor concurrency the pipeline shares with live calls (a
// capacity.Leases in production). The pipeline takes a slot of its
// provider before each submission, as batch work (it may use the limit
// minus the reserve kept for live traffic), and gives it back when the
// answer arrives. The pipeline takes them when Deps.Slots is set.
type Slots interface {
	// AcquireBatch takes one STT slot of provider for holder. granted false:
	// no room now. release is called once the vendor answered.
	AcquireBatch(ctx context.Context, provider, holder string) (release func(), granted bool)
}

// takeSlot asks for a slot; without one the job snoozes (no River attempt
// used) with waiting_for "provider capacity".
func (p *Pipeline) takeSlot(ctx context.Context, provider, holder string) (release func(), o outcome) {
	if p.slots == nil {
		return func() {}, next
	}
	release, ok := p.slots.AcquireBatch(ctx, provider, holder)
	if !ok {
		p.log.Debug("no vendor slot: waiting", slog.String("waiting_for", "provider capacity"), slog.String("provider", provider),
			slog.String("recording", holder))
		return nil, snoozeFor(p.slotWait)
	}
	return release, next
}
