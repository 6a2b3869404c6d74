package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/outbox"
)

func (a *commands) outboxCommand() *cobra.Command {
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
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			l, err := e.Outbox.List(cmd.Context(), state, 1000)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(l)
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKEY\tTARGET\tSTATE\tTRIES\tLAST CLASS\tCRM ID\tDEADLINE")
			for _, r := range l.Rows {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.IdempotencyKey, r.Target, r.State, r.Attempts,
					orDash(printable(r.LastClass)), orDash(printable(r.CRMID)), r.Deadline.Format(time.RFC3339))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			names := make([]string, 0, len(l.Counters))
			for n := range l.Counters {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(out, "%s %d\n", n, l.Counters[n])
			}
			fmt.Fprintf(out, "pending %d\n", l.Pending)
			age := ""
			if l.Pending > 0 {
				age = fmt.Sprintf(" (%s)", time.Duration(l.OldestPendingAgeSeconds)*time.Second)
			}
			fmt.Fprintf(out, "oldest_pending_age_seconds %d%s\n", l.OldestPendingAgeSeconds, age)
			return nil
		},
	}
	list.Flags().StringVar(&state, "state", "", "only this state")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Send a dead delivery again (same idempotency key, fresh delivery deadline), recorded as its own event",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("outbox id %q: %w", args[0], err)
			}
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			if err := e.Outbox.Retry(cmd.Context(), e.Client, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "outbox row %d is pending again\n", id)
			return nil
		},
	}
	cmd.AddCommand(list, retry)
	return cmd
}
