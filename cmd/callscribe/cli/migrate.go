package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/migrations"
)

// migrateDownOptions are the flags of `callscribe migrate down`.
type migrateDownOptions struct{ all, forceDataLoss bool }

// Validate has nothing to refuse: both flags are switches; the migrator
// refuses to drop rows without --force-data-loss.
func (o migrateDownOptions) Validate() error { return nil }

func (a *commands) migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, roll back or list database migrations (River's and callscribe's)",
	}
	run := func(fn func(cmd *cobra.Command, m *migrations.Migrator) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			if a.Config.DatabaseURL == "" {
				return app.ErrNoDatabase
			}
			pool, err := app.ConnectOwner(cmd.Context(), a.Config.DatabaseURL)
			if err != nil {
				return err
			}
			defer pool.Close()
			return fn(cmd, migrations.New(pool, a.Logger))
		}
	}
	printSteps := func(cmd *cobra.Command, steps []migrations.Step, none string) {
		if len(steps) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), none)
		}
		for _, s := range steps {
			fmt.Fprintln(cmd.OutOrStdout(), s)
		}
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (idempotent; safe to run from several processes at once)",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, m *migrations.Migrator) error {
			steps, err := m.Up(cmd.Context())
			printSteps(cmd, steps, "nothing to apply: the schema is up to date")
			if err != nil {
				return err
			}
			if r := m.Roles(); r.Granted {
				fmt.Fprintf(cmd.OutOrStdout(), "roles: %s (what the workers act as) and %s (owns the purge) in place\n",
					migrations.RuntimeRole, migrations.PurgeRole)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "roles: not in place (%s): the runtime acts as the tables' owner; an administrator runs the SQL of `callscribe migrate roles` (docs/operations.md)\n",
					r.Why)
			}
			return nil
		}),
	}
	var do migrateDownOptions
	down := &cobra.Command{
		Use:   "down",
		Short: "Roll back the newest callscribe migration (--all: every migration, River's tables too); refuses to destroy rows unless --force-data-loss",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := do.Validate(); err != nil {
				return err
			}
			return run(func(cmd *cobra.Command, m *migrations.Migrator) error {
				steps, err := m.Down(cmd.Context(), migrations.DownOpts{All: do.all, ForceDataLoss: do.forceDataLoss})
				printSteps(cmd, steps, "nothing to roll back")
				return err
			})(cmd, args)
		},
	}
	down.Flags().BoolVar(&do.all, "all", false, "roll back everything, River's tables included")
	down.Flags().BoolVar(&do.forceDataLoss, "force-data-loss", false, "roll back even when the tables it drops hold rows")
	roles := &cobra.Command{
		Use:   "roles",
		Short: "Print the SQL that creates callscribe's roles and grants their privileges, for an administrator to run where `migrate up` may not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			create, grants := migrations.RolesSQL()
			fmt.Fprintf(cmd.OutOrStdout(), "-- once per cluster, as a user that may create roles:\n%s\n-- then in each callscribe database, as the user that migrated it (a member of callscribe_purge):\n%s",
				create, grants)
			return nil
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, m *migrations.Migrator) error {
			st, err := m.Status(cmd.Context())
			if err != nil {
				return err
			}
			pending := 0
			for _, s := range st {
				mark := "applied"
				if !s.Applied {
					mark = "pending"
					pending++
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%-8s %-10s %05d %s\n", mark, s.Line, s.Version, s.Name)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d migrations, %d pending\n", len(st), pending)
			return nil
		}),
	}
	cmd.AddCommand(up, down, status, roles)
	return cmd
}
