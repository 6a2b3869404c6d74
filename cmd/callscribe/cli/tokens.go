package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
)

func (a *commands) tokensCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke the API tokens of `callscribe serve` (stored hashed)",
	}
	// Tokens are created as the login user (the owner that migrated), not
	// as the runtime role, so that the runtime role (serve, workers) needs
	// no INSERT on api_tokens: a token it could write would be a key to
	// every tenant. Listing and revoking act as the runtime role.
	withStoreAs := func(owner bool, fn func(cmd *cobra.Command, args []string, s *auth.Store) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if a.Config.DatabaseURL == "" {
				return app.ErrNoDatabase
			}
			connectStore := func() (*pgxpool.Pool, error) { return app.Connect(cmd.Context(), a.Config.DatabaseURL, a.Logger) }
			if owner {
				connectStore = func() (*pgxpool.Pool, error) { return app.ConnectOwner(cmd.Context(), a.Config.DatabaseURL) }
			}
			pool, err := connectStore()
			if err != nil {
				return err
			}
			defer pool.Close()
			return fn(cmd, args, auth.New(pool))
		}
	}
	withStore := func(fn func(cmd *cobra.Command, args []string, s *auth.Store) error) func(*cobra.Command, []string) error {
		return withStoreAs(false, fn)
	}
	var tenant, name string
	var admin bool
	create := &cobra.Command{
		Use:   "create (--tenant T | --admin) [--name N]",
		Short: "Create a token for a tenant (its organisation in the capacity API) or an admin token; the token is printed once, alone on the last line",
		Args:  cobra.NoArgs,
		RunE: withStoreAs(true, func(cmd *cobra.Command, _ []string, s *auth.Store) error {
			if admin == (tenant != "") {
				return errors.New("tokens create: give --tenant T or --admin, not both")
			}
			tok, secret, err := s.Create(cmd.Context(), tenant, name, admin)
			if err != nil {
				return err
			}
			who := "tenant " + tok.Tenant
			if tok.Admin {
				who = "admin"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %d (%s) created; it is shown once, below, and stored only as a hash:\n%s\n", tok.ID, who, secret)
			return nil
		}),
	}
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant the token reads and writes (the organisation in the capacity API)")
	create.Flags().BoolVar(&admin, "admin", false, "an admin token: every tenant, and the operator endpoints")
	create.Flags().StringVar(&name, "name", "", "a note for people (at most 128 bytes)")
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List tokens (never their secrets), revoked ones too",
		Args:  cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, _ []string, s *auth.Store) error {
			all, err := s.List(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if all == nil {
					all = []auth.Token{}
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"tokens": all})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tNAME\tCREATED\tREVOKED")
			for _, t := range all {
				who, revoked := t.Tenant, "-"
				if t.Admin {
					who = "(admin)"
				}
				if t.RevokedAt != nil {
					revoked = t.RevokedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", t.ID, printable(who), printable(t.Name), t.CreatedAt.Format(time.RFC3339), revoked)
			}
			return tw.Flush()
		}),
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token at once",
		Args:  cobra.ExactArgs(1),
		RunE: withStore(func(cmd *cobra.Command, args []string, s *auth.Store) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return fmt.Errorf("tokens revoke: %q is not a token id", args[0])
			}
			t, err := s.Revoke(cmd.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %d revoked at %s\n", t.ID, t.RevokedAt.UTC().Format(time.RFC3339))
			return nil
		}),
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
