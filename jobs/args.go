package jobs

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// TranscribeArgs drives one recording through the pipeline.
type TranscribeArgs struct {
	RecordingID uuid.UUID `json:"recording_id"`
	// Queue is QueueImmediate or QueueBatch, by the recording's lane.
	Queue string `json:"queue"`
}

// Kind is the River job kind.
func (TranscribeArgs) Kind() string { return "transcribe" }

// InsertOpts: one active job per recording.
func (a TranscribeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       a.Queue,
		MaxAttempts: 25,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
				rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}

// SweepArgs expires overdue recordings; it runs periodically.
type SweepArgs struct{}

// Kind is the River job kind.
func (SweepArgs) Kind() string { return "deadline_sweep" }

// InsertOpts: the sweep runs on the batch queue, one at a time.
func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}
