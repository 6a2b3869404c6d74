package cli

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
)

// setLimitOptions are the arguments of `callscribe capacity set-limit`.
type setLimitOptions struct {
	provider, kind, limitArg string
	limit                    int // limitArg parsed by Validate
}

// Validate parses LIMIT, a whole number >= 0.
func (o *setLimitOptions) Validate() error {
	n, err := strconv.Atoi(o.limitArg)
	if err != nil || n < 0 {
		return fmt.Errorf("LIMIT %q: want a whole number >= 0", o.limitArg)
	}
	o.limit = n
	return nil
}

func (a *commands) capacityCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "capacity", Short: "Vendor concurrency slots shared by live calls and the pipeline"}
	status := &cobra.Command{
		Use:   "status",
		Short: "In use, configured and effective (learned) limits, and the latest per-minute peak, per provider and kind",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, rdb, err := a.OpenLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			st, err := l.Status(cmd.Context())
			if err != nil {
				return err
			}
			return render.Capacity(cmd.OutOrStdout(), st)
		},
	}
	setLimit := &cobra.Command{
		Use:   "set-limit PROVIDER KIND LIMIT",
		Short: "Set a provider's effective limit (the operator's; clears a learned one). Nothing raises a limit automatically.",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := setLimitOptions{provider: args[0], kind: args[1], limitArg: args[2]}
			if err := o.Validate(); err != nil {
				return err
			}
			l, rdb, err := a.OpenLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			if err := l.SetLimit(cmd.Context(), o.provider, o.kind, o.limit); err != nil {
				return err
			}
			a.Logger.Info("capacity limit set by an operator", slog.String("provider", o.provider), slog.String("kind", o.kind), slog.Int("limit", o.limit))
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s limit set to %d\n", o.provider, o.kind, o.limit)
			return nil
		},
	}
	cmd.AddCommand(status, setLimit)
	return cmd
}
