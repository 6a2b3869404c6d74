package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/ledger"
)

func (a *commands) rolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Roll deferral out by tenant cohort: observe (record what would be held back) or enforce, switched at run time",
	}
	var reason string
	set := &cobra.Command{
		Use:   "set COHORT observe|enforce",
		Short: "Set a cohort's deferral mode; running workers follow within " + "2s" + ", no restart",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			c, err := e.Ledger.SetRolloutMode(cmd.Context(), args[0], ledger.RolloutMode(args[1]), reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cohort %s: %s (since %s)\n", c.Cohort, c.Mode, c.UpdatedAt.Format(time.RFC3339))
			return nil
		},
	}
	set.Flags().StringVar(&reason, "reason", "", "why, recorded with the change")
	var since time.Duration
	var asJSON bool
	report := func(use, short string, figures bool) *cobra.Command {
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
				if err != nil {
					return err
				}
				defer e.Close()
				rep, err := e.Jobs.RolloutReport(cmd.Context(), time.Now().Add(-since))
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(map[string]any{"since": time.Now().Add(-since).UTC(), "cohorts": rep})
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				if !figures {
					fmt.Fprintln(tw, "COHORT\tMODE\tTENANTS")
					for _, r := range rep {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(r.Cohort), r.Mode, printable(strings.Join(r.Tenants, ",")))
					}
					return tw.Flush()
				}
				fmt.Fprintf(tw, "since %s\n", time.Now().Add(-since).UTC().Format(time.RFC3339))
				fmt.Fprintln(tw, "COHORT\tMODE\tSUBMISSIONS\tIGNORED A KNOWN COOLDOWN\t429s\t429s AFTER THOSE\tIN FLIGHT\tGAP p50/p99")
				for _, r := range rep {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s/%s\n", printable(r.Cohort), r.Mode, r.Submissions, r.IgnoredKnownCooldown,
						r.Throttled, r.ThrottledIgnored, r.InFlight, r.GapP50, r.GapP99)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "A submission ignored a known cooldown when an offer its admission had read (by sequence number) still deferred the scope; in an observed cohort those (and the 429s after them) are what enforcement would have held back, an enforced cohort sends none. In flight: sent while a later cooldown was being announced (allowed).")
				return nil
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		if figures {
			c.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back")
		}
		return c
	}
	cmd.AddCommand(set, report("list [--json]", "Cohorts with their mode and tenants (pipeline.tenants.<id>.cohort)", false),
		report("report [--since 24h] [--json]", "What enforcement would have changed for observed cohorts, beside enforced ones", true))
	return cmd
}
