package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
)

func (a *commands) callerIDsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "caller-ids",
		Short: "Each organisation's pool of outbound caller IDs (the numbers its calls dial from)",
		Long: fmt.Sprintf(`An organisation's calls take numbers from its pool through the capacity API
(POST /v1/caller-ids:acquire and :release): one call per number at a time; a
number not given back returns to the pool %d minutes after it was taken.
Numbers are E.164: '+' then %d–%d digits.`, int(capacity.StaleAfterDefault.Minutes()), capacity.CallerIDDigitsMin, capacity.CallerIDDigitsMax),
	}
	var org string
	var asJSON, force bool
	add := &cobra.Command{
		Use:   "add --org ORG NUMBER...",
		Short: "Add numbers to the organisation's pool, free (numbers already there are left as they are)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, closeFn, err := a.OpenCallerIDs()
			if err != nil {
				return err
			}
			defer closeFn()
			n, err := c.Add(cmd.Context(), org, args...)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"org": org, "added": n, "already_there": len(args) - n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "org %s: %d added, %d already there\n", org, n, len(args)-n)
			return nil
		},
	}
	remove := &cobra.Command{
		Use:   "remove --org ORG [--force] NUMBER...",
		Short: "Remove numbers from the organisation's pool; a number a call holds is refused (nothing removed) unless --force",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, closeFn, err := a.OpenCallerIDs()
			if err != nil {
				return err
			}
			defer closeFn()
			n, err := c.Remove(cmd.Context(), org, force, args...)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"org": org, "removed": n, "not_there": len(args) - n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "org %s: %d removed, %d not in the pool\n", org, n, len(args)-n)
			return nil
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove numbers even while calls hold them (their releases then free nothing)")
	list := &cobra.Command{
		Use:   "list --org ORG [--json]",
		Short: "The organisation's numbers: free, busy or stale, busy since, and the holding call",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, closeFn, err := a.OpenCallerIDs()
			if err != nil {
				return err
			}
			defer closeFn()
			l, err := c.List(cmd.Context(), org)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"org": org, "numbers": l})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NUMBER\tSTATE\tBUSY SINCE\tCALL")
			for _, s := range l {
				since, call := "-", "-"
				if !s.BusySince.IsZero() {
					since, call = s.BusySince.UTC().Format("2006-01-02 15:04:05Z"), s.CallID
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Number, s.State, since, call)
			}
			return tw.Flush()
		},
	}
	for _, c := range []*cobra.Command{add, remove, list} {
		c.Flags().StringVar(&org, "org", "", "the organisation (required)")
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		_ = c.MarkFlagRequired("org")
	}
	cmd.AddCommand(add, remove, list)
	return cmd
}
