package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/migrations"
)

func (a *app) demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Start the services (throwaway ones unless configured), migrate, print how to connect; Ctrl-C stops and cleans up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "callscribe demo: starting services…")
			svc, err := a.openServices(ctx)
			if err != nil {
				return err
			}
			defer func() {
				stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := svc.Close(stopCtx); err != nil {
					a.logger.Error("stopping demo services", "error", err)
				}
				for _, t := range svc.Throwaway {
					fmt.Fprintln(out, "  stopped and removed:", t)
				}
				fmt.Fprintln(out, "callscribe demo: stopped.")
			}()

			steps, err := migrations.New(svc.Pool, a.logger).Up(ctx)
			if err != nil {
				return err
			}
			st, err := migrations.New(svc.Pool, a.logger).Status(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  schema:     %d migrations applied now, %d in all (River's and callscribe's)\n", len(steps), len(st))
			fmt.Fprintf(out, "  PostgreSQL: %s\n", svc.DatabaseHint)
			fmt.Fprintf(out, "  Redis:      %s\n", svc.RedisHint)
			for _, t := range svc.Throwaway {
				fmt.Fprintln(out, "  throwaway: ", t, "(removed when the demo stops)")
			}
			fmt.Fprintln(out, "callscribe demo: ready. Press Ctrl-C to stop.")
			<-ctx.Done()
			fmt.Fprintln(out, "callscribe demo: stopping…")
			return nil
		},
	}
}
