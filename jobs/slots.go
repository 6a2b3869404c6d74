package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// CapacityWaitDefault is Deps.SlotWait's default: how long a job waits
// before asking again when its vendor has no free slot.
const CapacityWaitDefault = 2 * time.Second

// Slots is the vendor concurrency the pipeline shares with live calls (a
// capacity.Leases in production). The pipeline takes a slot of its
// provider before each submission, as batch work (it may use the limit
// minus the reserve kept for live traffic), keyed by the recording so that
// any process can find it again; it gives the slot back when the vendor's
// answer arrives, and keeps it while the vendor processes work it accepted
// (202) until the result arrives. The pipeline takes them when Deps.Slots
// is set.
type Slots interface {
	// AcquireBatch takes one STT slot of provider for holder (asking again
	// for a slot holder already has grants it again). granted false: no
	// room now. inUse is how many slots of provider are held, this one
	// included.
	AcquireBatch(ctx context.Context, provider, holder string) (inUse int, granted bool)
	// Release gives holder's slot back; a holder without one is a no-op.
	Release(ctx context.Context, provider, holder string)
	// Extend keeps holder's slot for d more (the vendor is processing it).
	Extend(ctx context.Context, provider, holder string, d time.Duration)
	// ReportRefusal says the vendor refused a request of provider for its
	// concurrency limit while inUse slots were held (capacity lowers its
	// learned limit when inUse is below it).
	ReportRefusal(ctx context.Context, provider string, inUse int)
}

// LeaseSlots is Slots whose slots are capacity leases: the pipeline gives
// a slot back with the recording's window slot in one round trip to Redis
// (capacity.Windows.ReleaseWithLease) instead of calling Release.
type LeaseSlots interface {
	Slots
	// Lease is holder's slot of provider as Release would give it back,
	// with the leases it belongs to; nil leases: the provider's slots are
	// not counted.
	Lease(provider, holder string) (*capacity.Leases, capacity.Lease)
	// BatchRequest is the request AcquireBatch makes for holder's slot of
	// provider, with the leases it asks, so that the pipeline can ask for
	// it with the recording's window slot in one round trip
	// (capacity.Windows.AcquireWithLease); nil leases: not counted.
	BatchRequest(provider, holder string) (*capacity.Leases, capacity.Request)
}

// takeSlot asks for a slot; without one the job snoozes (no River attempt
// used) with waiting_for "provider capacity".
func (p *Pipeline) takeSlot(ctx context.Context, s *stepCtx) outcome {
	if p.slots == nil || s.held.slot {
		return next // none, or taken with the window slot
	}
	var inUse int
	ok := false
	if s.held.slotRefused {
		s.held.slotRefused = false // refused with the window slot: not asked again
	} else {
		inUse, ok = p.slots.AcquireBatch(ctx, s.prov.Name(), s.rec.ID.String())
	}
	if !ok {
		s.log.Debug("no vendor slot: waiting", slog.String("waiting_for", "provider capacity"), slog.String("provider", s.prov.Name()))
		return snoozeFor(p.slotWait)
	}
	s.held.slotInUse, s.held.slot = inUse, true
	return next
}
