package jobs_test

import (
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/outbox"
)

// commitThrough sets deps to commit validated recordings through ob, as
// callscribe does: queued with group commit (QueueCommit), step by step
// when its group rolls back or the set's version was committed first
// (Commit).
func commitThrough(deps *jobs.Deps, ob *outbox.Outbox) {
	deps.Commit, deps.QueueCommit, deps.Drain = ob.CommitStep, ob.QueueCommitStep, ob.Drain
}
