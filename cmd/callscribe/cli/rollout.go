package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/ledger"
)

// rolloutSetOptions are the arguments and flag of `callscribe rollout set`.
type rolloutSetOptions struct{ cohort, mode, reason string }

// Validate refuses a mode other than observe or enforce.
func (o rolloutSetOptions) Validate() error {
	if m := ledger.RolloutMode(o.mode); m != ledger.RolloutObserve && m != ledger.RolloutEnforce {
		return fmt.Errorf("mode %q: want observe or enforce", o.mode)
	}
	return nil
}

// rolloutListOptions are the flags of `callscribe rollout list`.
type rolloutListOptions struct{ json bool }

// Validate: every value of the flag is good.
func (rolloutListOptions) Validate() error { return nil }

// rolloutReportOptions are the flags of `callscribe rollout report`.
type rolloutReportOptions struct {
	since time.Duration
	json  bool
}

// Validate refuses a --since that does not reach back.
func (o rolloutReportOptions) Validate() error { return wantSince(o.since) }

func (a *commands) rolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Roll deferral out by tenant cohort: observe (record what would be held back) or enforce, switched at run time",
	}
	var so rolloutSetOptions
	set := &cobra.Command{
		Use:   "set COHORT observe|enforce",
		Short: "Set a cohort's deferral mode; running workers follow within " + "2s" + ", no restart",
		Args:  cobra.ExactArgs(2),
		RunE: a.withPipelineArgs(func(args []string) validator {
			so.cohort, so.mode = args[0], args[1]
			return so
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			c, err := e.Ledger.SetRolloutMode(cmd.Context(), so.cohort, ledger.RolloutMode(so.mode), so.reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cohort %s: %s (since %s)\n", c.Cohort, c.Mode, c.UpdatedAt.Format(time.RFC3339))
			return nil
		}),
	}
	set.Flags().StringVar(&so.reason, "reason", "", "why, recorded with the change")
	var lo rolloutListOptions
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "Cohorts with their mode and tenants (pipeline.tenants.<id>.cohort); a cohort nobody set runs in pipeline.rollout_default",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&lo, func(cmd *cobra.Command, e *app.Pipeline) error {
			cohorts, err := e.Jobs.Cohorts(cmd.Context())
			if err != nil {
				return err
			}
			if lo.json {
				return render.JSON(cmd.OutOrStdout(), map[string]any{"default": e.Jobs.Config().RolloutDefault, "cohorts": cohorts})
			}
			return render.Cohorts(cmd.OutOrStdout(), cohorts)
		}),
	}
	list.Flags().BoolVar(&lo.json, "json", false, "print JSON")
	ro := rolloutReportOptions{since: 24 * time.Hour}
	report := &cobra.Command{
		Use:   "report [--since 24h] [--json]",
		Short: "What enforcement would have changed for observed cohorts, beside enforced ones",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&ro, func(cmd *cobra.Command, e *app.Pipeline) error {
			since := time.Now().Add(-ro.since)
			rep, err := e.Jobs.RolloutReport(cmd.Context(), since)
			if err != nil {
				return err
			}
			if ro.json {
				return render.JSON(cmd.OutOrStdout(), map[string]any{"since": since.UTC(), "cohorts": rep})
			}
			return render.Rollout(cmd.OutOrStdout(), since, rep)
		}),
	}
	report.Flags().BoolVar(&ro.json, "json", false, "print JSON")
	report.Flags().DurationVar(&ro.since, "since", 24*time.Hour, "how far back")
	cmd.AddCommand(set, list, report)
	return cmd
}
