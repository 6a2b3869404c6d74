package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/demo"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

func (a *commands) demoCommand() *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the pipeline end to end on throwaway services against a misbehaving speech vendor, then report",
		Long: `demo starts PostgreSQL and Redis (throwaway ones unless configured), migrates,
starts an stt-http/v1 simulator on loopback that throttles (429 with every
Retry-After form), fails (503, 5xx), answers late, answers asynchronously
and drops connections after accepting, ingests the recordings of
testdata/recordings for three tenants on both lanes, runs the workers until
every recording is settled, and prints a report. It exits non-zero if an
invariant broke: a submission that ignored a cooldown the platform knew
of, a recording transcribed twice, a history that does not replay, a recording
that did not reach committed, or an action set applied twice in the CRM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Sim.RetryAfterForm = sttsim.RetryAfterForm(o.Form)
			if err := o.Validate(); err != nil {
				return err
			}
			return demo.Run(cmd.Context(), a.App, cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Recordings, "recordings", "testdata/recordings", "directory with manifest.jsonl and the WAVs it names")
	f.IntVar(&o.Copies, "copies", 3, "ingest each recording this many times (as different calls)")
	f.BoolVar(&o.Verbose, "verbose", false, "log every throttle and retry (default: warnings only, beside the progress bar)")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "give up waiting for the recordings after this long")
	f.BoolVar(&o.Hold, "hold", false, "after the report, keep the services running until Ctrl-C")
	f.Float64Var(&o.Sim.RateLimitShare, "rate-limit-share", 0.15, "simulator: share of submissions answered 429")
	f.DurationVar(&o.Sim.Cooldown, "cooldown", 1500*time.Millisecond, "simulator: cooldown announced with each 429")
	f.IntVar(&o.Sim.MaxInFlight, "max-in-flight", 3, "simulator: requests each scope may have in flight; 429 above (0: no limit)")
	f.DurationVar(&o.Sim.InFlightRetryAfter, "in-flight-retry-after", time.Second, "simulator: Retry-After of a 429 over the in-flight limit")
	f.Uint64Var(&o.Seed, "seed", 1, "simulator: seed of its trouble, the same for the baseline run")
	f.BoolVar(&o.Baseline, "baseline", true, "after the pipeline, run per-worker sleepers on a fresh simulator with the same seed and report their figures beside callscribe's")
	f.StringVar(&o.Form, "retry-after-form", string(sttsim.FormMixed), "simulator: seconds, imf-fixdate, rfc850, asctime, none, malformed or mixed")
	f.Float64Var(&o.Sim.UnavailableShare, "unavailable-share", 0.05, "simulator: share answered 503")
	f.Float64Var(&o.Sim.ServerErrorShare, "server-error-share", 0.03, "simulator: share answered 500/502/504")
	f.DurationVar(&o.Sim.Latency, "latency", 40*time.Millisecond, "simulator: latency")
	f.DurationVar(&o.Sim.LatencyJitter, "latency-jitter", 120*time.Millisecond, "simulator: extra random latency")
	f.Float64Var(&o.Sim.AsyncShare, "async-share", 0.3, "simulator: share answered 202 and finished later")
	f.DurationVar(&o.Sim.ProcessingTime, "processing-time", 800*time.Millisecond, "simulator: async transcription time")
	f.Float64Var(&o.Sim.DropAfterAcceptShare, "drop-after-accept-share", 0.03, "simulator: share accepted, then the connection dropped")
	return cmd
}
