package live

import (
	"sync/atomic"
	"time"
)

// GateOutcome is how an Enter ended: admitted or rejected.
type GateOutcome int

// The outcomes of Enter (a cancelled Enter has none).
const (
	GateAdmitted GateOutcome = iota
	GateRejected
)

// String returns "admitted" or "rejected".
func (o GateOutcome) String() string {
	if o == GateRejected {
		return "rejected"
	}
	return "admitted"
}

// GateWaitBuckets are the upper bounds, in seconds, of the buckets
// GateWaits counts Enter's waits in: from an admission without a wait to
// SlotWaitMax's two minutes.
var GateWaitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120}

// GateWaits are the waits of one outcome of Enter in this process, as a
// histogram over GateWaitBuckets.
type GateWaits struct {
	// Count is the Enters of the outcome; Sum their waits in seconds.
	Count uint64
	Sum   float64
	// Cumulative maps each bound of GateWaitBuckets to how many waited at
	// most that long (Prometheus's cumulative buckets).
	Cumulative map[float64]uint64
}

// waitHistogram counts waits over GateWaitBuckets; safe for concurrent use.
type waitHistogram struct {
	buckets [16]atomic.Uint64 // GateWaitBuckets, then +Inf
	count   atomic.Uint64
	sumUs   atomic.Uint64 // microseconds
}

func (h *waitHistogram) observe(d time.Duration) {
	s := max(d, 0).Seconds()
	i := len(GateWaitBuckets)
	for j, b := range GateWaitBuckets {
		if s <= b {
			i = j
			break
		}
	}
	h.buckets[i].Add(1)
	h.sumUs.Add(uint64(max(d, 0).Microseconds()))
	h.count.Add(1) // last: a snapshot never counts more than its buckets hold
}

func (h *waitHistogram) snapshot() GateWaits {
	w := GateWaits{Count: h.count.Load(), Cumulative: make(map[float64]uint64, len(GateWaitBuckets))}
	w.Sum = float64(h.sumUs.Load()) / 1e6
	var cum uint64
	for i, b := range GateWaitBuckets {
		cum += h.buckets[i].Load()
		w.Cumulative[b] = min(cum, w.Count)
	}
	return w
}

// GateStats are this process's figures of a Gate, for its metrics.
type GateStats struct {
	Name string
	Size int
	// Waiting is the Enters waiting now.
	Waiting int64
	// Admitted (uncounted ones included), Rejected and Reclaimed (tickets
	// past their TTL reclaimed by this process's Enters) are counters.
	Admitted, Rejected, Reclaimed int64
	// Waits holds the waits of each outcome (GateAdmitted, GateRejected).
	Waits [2]GateWaits
}

// Stats returns this process's figures of g. InUse, which is shared by
// every process, is read from Redis apart.
func (g *Gate) Stats() GateStats {
	return GateStats{Name: g.cfg.Name, Size: g.cfg.Size, Waiting: g.waiting.Load(),
		Admitted: g.admitted.Load(), Rejected: g.rejected.Load(), Reclaimed: g.reclaimed.Load(),
		Waits: [2]GateWaits{g.waits[GateAdmitted].snapshot(), g.waits[GateRejected].snapshot()}}
}
