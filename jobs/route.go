package jobs

import (
	"fmt"
	"time"

	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// PriorityOneByOne is the River priority of the transcribe job of a batch
// recording whose vendor has no batch contract (River's 1 is the highest,
// 4 the lowest; every other transcribe job has 1): within the batch queue
// it yields to the rest.
const PriorityOneByOne = 3

// route decides req's lane at ingest, and says why (ledger.IngestRoute,
// recorded in the recording's first event):
//
//   - A lane asked for is kept (with a note when its deadline is sooner
//     than the batch lane's completion bound).
//   - Otherwise, a deadline, or a CRM action deadline, sooner than
//     Config.BatchCompletionBound from now goes to the immediate lane;
//     anything else to the batch lane.
//   - Batch work whose vendor has no batch contract (prov's Capabilities)
//     is submitted one by one, at lower priority (PriorityOneByOne).
func (c Config) route(req IngestRequest, prov stt.Provider, now time.Time) ledger.IngestRoute {
	bound := c.BatchCompletionBound
	soon := func(t time.Time) bool { return !t.IsZero() && t.Sub(now) < bound }
	in := func(t time.Time) string { return t.Sub(now).Round(time.Second).String() }
	var r ledger.IngestRoute
	switch {
	case req.Lane == ledger.LaneImmediate:
		r = ledger.IngestRoute{Lane: ledger.LaneImmediate, Reason: "asked for the immediate lane"}
	case req.Lane == ledger.LaneBatch:
		r = ledger.IngestRoute{Lane: ledger.LaneBatch, Reason: "asked for the batch lane"}
		if soon(req.Deadline) {
			r.Reason += fmt.Sprintf(" (its deadline, in %s, is sooner than the batch lane's completion bound of %s: it may expire)", in(req.Deadline), bound)
		}
	case soon(req.Deadline):
		r = ledger.IngestRoute{Lane: ledger.LaneImmediate,
			Reason: fmt.Sprintf("deadline in %s, sooner than the batch lane's completion bound of %s", in(req.Deadline), bound)}
	case soon(req.ActionDeadline):
		r = ledger.IngestRoute{Lane: ledger.LaneImmediate,
			Reason: fmt.Sprintf("CRM action deadline in %s, sooner than the batch lane's completion bound of %s", in(req.ActionDeadline), bound)}
	default:
		r = ledger.IngestRoute{Lane: ledger.LaneBatch,
			Reason: fmt.Sprintf("no deadline sooner than the batch lane's completion bound of %s", bound)}
	}
	switch {
	case r.Lane != ledger.LaneBatch || prov == nil:
	case !prov.Capabilities().Batch:
		r.OneByOne = true
		r.Reason += fmt.Sprintf("; %s has no batch contract: submitted one by one in the batch queue at lower priority", prov.Name())
	case c.Batch.Manifests:
		r.Reason += "; sent in the batch lane's manifests"
	}
	return r
}
