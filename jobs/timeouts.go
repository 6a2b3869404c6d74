package jobs

import (
	"time"

	"github.com/callscribe/callscribe/jobs/stt"
)

// The bounds of one run of the pipeline's own jobs: each is its worker's
// River Timeout, so that none of them is bound by Config.StepTimeout,
// which is sized for a transcription (River's JobTimeout, the bound of a
// transcribe step). Past its bound a run's context is cancelled and the
// job retries; River's rescuer takes over a job left running by a dead
// worker only once its bound has passed too. Each job commits its work as
// it goes, so a run cut short loses nothing: the next one goes on.
const (
	// SweepTimeout bounds a run of the deadline sweep, which expires
	// overdue recordings 500 at a time, each expiry one short
	// transaction, every Config.SweepInterval (1m by default): a run
	// still going after five intervals is stuck, and it holds back the
	// next run (one sweep at a time).
	SweepTimeout = 5 * time.Minute
	// RetentionTimeout bounds a run of the retention purge, which deletes
	// in batches of one statement each and removes their audio objects
	// from the store: half of Config.RetentionEvery's default hour, room
	// for a large backlog on a slow store, and the next run in the hour
	// goes on where it stopped.
	RetentionTimeout = 30 * time.Minute
	// FormManifestsTimeout bounds a run of the batch lane's forming of
	// manifests: one transaction over at most eight manifests' worth of
	// candidates, every BatchConfig.FormEvery (1s by default); a minute is
	// a database in trouble, not a busy one.
	FormManifestsTimeout = time.Minute
	// ManifestTimeout bounds one step of a manifest: one exchange with the
	// vendor's batch API (a submit or a poll, which the adapter bounds at
	// stt.TimeoutDefault) and the bookkeeping of its items
	// (BatchConfig.MaxItems, 100 by default), for which a minute more is
	// ample.
	ManifestTimeout = stt.TimeoutDefault + time.Minute
)

// jobTimeout is d, or the pipeline's cap when a test set a shorter one
// (so that a killed worker's job is taken over at once).
func (p *Pipeline) jobTimeout(d time.Duration) time.Duration {
	if p.timeoutCap > 0 {
		return min(d, p.timeoutCap)
	}
	return d
}
