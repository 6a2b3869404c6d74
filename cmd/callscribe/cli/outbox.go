package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/outbox"
)

func (a *app) outboxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "outbox", Short: "CRM deliveries: list them, retry dead ones"}
	var state string
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--state pending|delivered|dead] [--json]",
		Short: "List outbox rows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch state {
			case "", outbox.StatePending, outbox.StateDelivered, outbox.StateDead:
			default:
				return fmt.Errorf("--state %q: want pending, delivered or dead", state)
			}
			e, err := a.openPipeline(cmd.Context(), pipelineCaps{})
			if err != nil {
				return err
			}
			defer e.Close()
			rows, err := e.outbox.Rows(cmd.Context(), state, 1000)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKEY\tTARGET\tSTATE\tTRIES\tLAST CLASS\tCRM ID")
			for _, r := range rows {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.IdempotencyKey, r.Target, r.State, r.Attempts, orDash(r.LastClass), orDash(r.CRMID))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			counters, err := e.outbox.Counters(cmd.Context())
			if err != nil {
				return err
			}
			names := make([]string, 0, len(counters))
			for n := range counters {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(out, "%s %d\n", n, counters[n])
			}
			return nil
		},
	}
	list.Flags().StringVar(&state, "state", "", "only this state")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Send a dead delivery again (same idempotency key), recorded as its own event",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("outbox id %q: %w", args[0], err)
			}
			e, err := a.openPipeline(cmd.Context(), pipelineCaps{})
			if err != nil {
				return err
			}
			defer e.Close()
			if err := e.outbox.Retry(cmd.Context(), e.client, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "outbox row %d is pending again\n", id)
			return nil
		},
	}
	cmd.AddCommand(list, retry)
	return cmd
}
