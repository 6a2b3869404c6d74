package cli

import (
	"fmt"
	"log/slog"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

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
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tKIND\tIN USE\tLIMIT\tEFFECTIVE\tPEAK (LAST MINUTE SEEN)")
			for _, s := range st {
				eff := strconv.Itoa(s.EffectiveLimit)
				if s.Learned {
					eff += " (learned)"
				}
				peak := "-"
				if n := len(s.PeakPerMinute); n > 0 {
					p := s.PeakPerMinute[n-1]
					peak = fmt.Sprintf("%d at %s", p.Peak, p.Minute.Format("15:04"))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.Provider, s.Kind, s.InUse, s.ConfiguredLimit, eff, peak)
			}
			return tw.Flush()
		},
	}
	setLimit := &cobra.Command{
		Use:   "set-limit PROVIDER KIND LIMIT",
		Short: "Set a provider's effective limit (the operator's; clears a learned one). Nothing raises a limit automatically.",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[2])
			if err != nil || n < 0 {
				return fmt.Errorf("LIMIT %q: want a whole number >= 0", args[2])
			}
			l, rdb, err := a.OpenLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			if err := l.SetLimit(cmd.Context(), args[0], args[1], n); err != nil {
				return err
			}
			a.Logger.Info("capacity limit set by an operator", slog.String("provider", args[0]), slog.String("kind", args[1]), slog.Int("limit", n))
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s limit set to %d\n", args[0], args[1], n)
			return nil
		},
	}
	cmd.AddCommand(status, setLimit)
	return cmd
}
