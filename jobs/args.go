package jobs

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/ledger"
)

// TranscribeArgs drives one recording through the pipeline.
type TranscribeArgs struct {
	RecordingID uuid.UUID `json:"recording_id" river:"unique"`
	// Queue is QueueImmediate or QueueBatch, by the recording's lane.
	Queue string `json:"queue" river:"unique"`
	// TenantID is the recording's tenant, so that a step reads the
	// recording and its scope's deferral in one statement. Jobs inserted
	// before it existed have none, and read them one after the other. It
	// is not part of the job's unique key (the key of a job with and
	// without it is the same).
	TenantID string `json:"tenant_id,omitempty"`
	// Priority is the job's River priority: 0 (River's default, 1) or
	// PriorityOneByOne for batch work whose vendor has no batch contract.
	// Not part of the unique key.
	Priority int `json:"priority,omitempty"`
}

// transcribeArgs are the args of rec's transcribe job.
func transcribeArgs(id uuid.UUID, tenantID string, lane ledger.Lane) TranscribeArgs {
	return TranscribeArgs{RecordingID: id, Queue: queueFor(lane), TenantID: tenantID}
}

// Kind is the River job kind.
func (TranscribeArgs) Kind() string { return "transcribe" }

// InsertOpts: one active job per recording.
func (a TranscribeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       a.Queue,
		Priority:    a.Priority,
		MaxAttempts: 25,
		UniqueOpts:  riverunique.ByArgs(rivertype.JobStateRetryable),
	}
}

// SweepArgs expires overdue recordings; it runs periodically.
type SweepArgs struct{}

// Kind is the River job kind.
func (SweepArgs) Kind() string { return "deadline_sweep" }

// InsertOpts: the sweep runs on the batch queue, one at a time.
func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, UniqueOpts: riverunique.ByArgs()}
}
