package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/callscribe/callscribe/jobs"
)

// Cohorts prints the table of `rollout list`: each cohort's mode (marked
// "(default)" when nobody set it: pipeline.rollout_default) and tenants.
func Cohorts(w io.Writer, cohorts []jobs.CohortMode) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COHORT\tMODE\tTENANTS")
	for _, r := range cohorts {
		mode := string(r.Mode)
		if !r.Stored {
			mode += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", Printable(r.Cohort), mode, Printable(strings.Join(r.Tenants, ",")))
	}
	return tw.Flush()
}

// Rollout prints `rollout report`: each cohort's submissions against
// cooldowns since since, and how to read them.
func Rollout(w io.Writer, since time.Time, rep []jobs.CohortReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "since %s\n", since.UTC().Format(time.RFC3339))
	fmt.Fprintln(tw, "COHORT\tMODE\tSUBMISSIONS\tIGNORED A KNOWN COOLDOWN\t429s\t429s AFTER THOSE\tIN FLIGHT\tGAP p50/p99")
	for _, r := range rep {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s/%s\n", Printable(r.Cohort), r.Mode, r.Submissions, r.IgnoredKnownCooldown,
			r.Throttled, r.ThrottledIgnored, r.InFlight, r.GapP50, r.GapP99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "A submission ignored a known cooldown when an offer its admission had read (by sequence number) still deferred the scope; in an observed cohort those (and the 429s after them) are what enforcement would have held back, an enforced cohort sends none. In flight: sent while a later cooldown was being announced (allowed).")
	return nil
}
