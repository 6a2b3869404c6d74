package render

import (
	"fmt"
	"io"
	"time"

	"github.com/callscribe/callscribe/outbox"
)

// Replay prints a replay run and its figures for people.
func Replay(w io.Writer, r outbox.ReplayRun) {
	rep := r.Report
	fmt.Fprintf(w, "replay run %d to %s (scope %s), %s .. %s, state %s\n", r.ID, r.Target, r.Scope,
		r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.State)
	fmt.Fprintf(w, "  started by %s at %s", r.StartedBy, r.CreatedAt.Format(time.RFC3339))
	if r.FinishedAt != nil {
		fmt.Fprintf(w, ", ended %s (%s)", r.FinishedAt.Format(time.RFC3339), r.FinishedAt.Sub(r.CreatedAt).Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	if r.MaxRate > 0 {
		fmt.Fprintf(w, "  rate ceiling:                 %g sends/s\n", r.MaxRate)
	}
	fmt.Fprintf(w, "  recordings replayed:          %d of %d enumerated\n", rep.RecordingsReplayed, r.Enumerated)
	fmt.Fprintf(w, "  audit events appended:        %d\n", rep.AuditEventsAppended)
	fmt.Fprintf(w, "  new action versions created:  %d (must be 0)\n", rep.NewActionVersions)
	fmt.Fprintf(w, "  deliveries:                   %d (%d pending)\n", rep.Deliveries, rep.Pending)
	fmt.Fprintf(w, "  CRM effects created:          %d (%d answered as replays: the target already had them)\n", rep.CRMEffectsCreated, rep.AnsweredAsReplays)
	fmt.Fprintf(w, "  throttled and retried:        %d (and %d transient failures retried; %d tries withdrawn unsent)\n", rep.Throttled, rep.Transient, rep.Withdrawn)
	fmt.Fprintf(w, "  sent inside a known cooldown: %d (must be 0; %d were in flight when one was announced)\n",
		rep.Sends.IgnoredKnownCooldown, rep.Sends.InFlight)
	fmt.Fprintf(w, "  dead:                         %d\n", rep.Dead)
	if rep.Cancelled > 0 {
		fmt.Fprintf(w, "  cancelled:                    %d (%s)\n", rep.Cancelled, r.Reason)
	}
	for _, d := range rep.DeadList {
		fmt.Fprintf(w, "    dead %s (%s): %s\n", d.IdempotencyKey, d.LastClass, d.Reason)
	}
}

// ReplayRuns prints one line per run, as `replay status` lists them.
func ReplayRuns(w io.Writer, runs []outbox.ReplayRun) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no replay runs")
	}
	for _, r := range runs {
		fmt.Fprintf(w, "run %d  %-11s  to %s  %s .. %s  recordings %d/%d  deliveries %d (pending %d, dead %d)\n",
			r.ID, r.State, r.Target, r.From.Format(time.DateOnly), r.To.Format(time.DateOnly),
			r.Report.RecordingsReplayed, r.Enumerated, r.Report.Deliveries, r.Report.Pending, r.Report.Dead)
	}
}
