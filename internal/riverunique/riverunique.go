// Package riverunique spells the uniqueness of callscribe's River jobs
// once: a job is unique by its args (the fields tagged river:"unique", or
// all of them) while it is active, so that inserting it again while one is
// waiting or running does nothing.
package riverunique

import (
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ByArgs is unique by args while a job is available, pending, running or
// scheduled (the states River requires of any unique set), and in also:
// rivertype.JobStateRetryable for a job of one entity (a recording, a
// delivery) that retries, so that no second job for it is inserted while
// it waits for its next try. A periodic job passes nothing: a failed run
// waiting for its retry does not hold back the next period's.
func ByArgs(also ...rivertype.JobState) river.UniqueOpts {
	states := []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	}
	states = append(states, also...)
	states = append(states, rivertype.JobStateScheduled)
	return river.UniqueOpts{ByArgs: true, ByState: states}
}
