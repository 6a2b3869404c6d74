package cli

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/outbox"
)

// outboxListOptions are the flags of `callscribe outbox list`.
type outboxListOptions struct {
	state string
	json  bool
}

// Validate refuses an unknown --state.
func (o outboxListOptions) Validate() error {
	switch o.state {
	case "", outbox.StatePending, outbox.StateDelivered, outbox.StateDead:
		return nil
	}
	return fmt.Errorf("--state %q: want pending, delivered or dead", o.state)
}

// outboxRetryOptions are the argument of `callscribe outbox retry`.
type outboxRetryOptions struct {
	row string
	id  int64 // row parsed by Validate
}

// Validate parses the row's id.
func (o *outboxRetryOptions) Validate() (err error) {
	if o.id, err = strconv.ParseInt(o.row, 10, 64); err != nil {
		return fmt.Errorf("outbox id %q: %w", o.row, err)
	}
	return nil
}

func (a *commands) outboxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "outbox", Short: "CRM deliveries: list them, retry dead ones"}
	var lo outboxListOptions
	list := &cobra.Command{
		Use:   "list [--state pending|delivered|dead] [--json]",
		Short: "List outbox rows",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&lo, func(cmd *cobra.Command, e *app.Pipeline) error {
			l, err := e.Outbox.List(cmd.Context(), lo.state, 1000)
			if err != nil {
				return err
			}
			if lo.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(l)
			}
			return render.Outbox(cmd.OutOrStdout(), l)
		}),
	}
	list.Flags().StringVar(&lo.state, "state", "", "only this state")
	list.Flags().BoolVar(&lo.json, "json", false, "print JSON")
	var ro outboxRetryOptions
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Send a dead delivery again (same idempotency key, fresh delivery deadline), recorded as its own event",
		Args:  cobra.ExactArgs(1),
		RunE: a.withPipelineArgs(func(args []string) validator {
			ro.row = args[0]
			return &ro
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			if err := e.Outbox.Retry(cmd.Context(), e.Client, ro.id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "outbox row %d is pending again\n", ro.id)
			return nil
		}),
	}
	cmd.AddCommand(list, retry)
	return cmd
}
