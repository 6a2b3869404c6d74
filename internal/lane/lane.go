// Package lane names whose work a request is, the one Lane type shared by
// the ledger (a recording's lane, stored in PostgreSQL), the pipeline and
// capacity (a vendor lease's lane, a concurrency window's lane). It is a
// leaf: it imports nothing of callscribe.
package lane

// Lane says whose work a request is, and so how much of a shared capacity
// it may take. The zero Lane is treated as Live by capacity's leases and
// as Immediate by its windows: only Batch is held back.
type Lane string

const (
	// Live is a call in progress: its vendor leases may use every slot up
	// to the limit.
	Live Lane = "live"
	// Immediate is a recording someone waits for: it may use a whole
	// concurrency window and is ordered before batch work.
	Immediate Lane = "immediate"
	// Batch is post-call work: its leases may use only the limit minus a
	// reserve kept for live traffic, and its window slots only the window
	// minus the share kept for the immediate lane.
	Batch Lane = "batch"
)

// IsBatch reports whether l is Batch, the one lane held back.
func (l Lane) IsBatch() bool { return l == Batch }
