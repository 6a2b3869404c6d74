package cli

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
)

// tokensCreateOptions are the flags of `callscribe tokens create`.
type tokensCreateOptions struct {
	tenant, name string
	admin        bool
}

// Validate wants a tenant or admin token, not both.
func (o tokensCreateOptions) Validate() error {
	if o.admin == (o.tenant != "") {
		return errors.New("tokens create: give --tenant T or --admin, not both")
	}
	return nil
}

// tokensListOptions are the flags of `callscribe tokens list`.
type tokensListOptions struct{ json bool }

// Validate has nothing to refuse: --json is a switch.
func (o tokensListOptions) Validate() error { return nil }

// tokensRevokeOptions are the argument of `callscribe tokens revoke`.
type tokensRevokeOptions struct {
	token string
	id    int64 // token parsed by Validate
}

// Validate parses the token's id.
func (o *tokensRevokeOptions) Validate() (err error) {
	if o.id, err = strconv.ParseInt(o.token, 10, 64); err != nil || o.id <= 0 {
		return fmt.Errorf("tokens revoke: %q is not a token id", o.token)
	}
	return nil
}

func (a *commands) tokensCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke the API tokens of `callscribe serve` (stored hashed)",
	}
	// Tokens are created as the login user (the owner that migrated), not
	// as the runtime role, so that the runtime role (serve, workers) needs
	// no INSERT on api_tokens: a token it could write would be a key to
	// every tenant. Listing and revoking act as the runtime role.
	// validate checks the command's options (bound to its arguments)
	// before anything is opened.
	withStoreAs := func(owner bool, validate func(args []string) error, fn func(cmd *cobra.Command, s *auth.Store) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if err := validate(args); err != nil {
				return err
			}
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
			return fn(cmd, auth.New(pool))
		}
	}
	var co tokensCreateOptions
	create := &cobra.Command{
		Use:   "create (--tenant T | --admin) [--name N]",
		Short: "Create a token for a tenant (its organisation in the capacity API) or an admin token; the token is printed once, alone on the last line",
		Args:  cobra.NoArgs,
		RunE: withStoreAs(true, func([]string) error { return co.Validate() }, func(cmd *cobra.Command, s *auth.Store) error {
			tok, secret, err := s.Create(cmd.Context(), co.tenant, co.name, co.admin)
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
	create.Flags().StringVar(&co.tenant, "tenant", "", "the tenant the token reads and writes (the organisation in the capacity API)")
	create.Flags().BoolVar(&co.admin, "admin", false, "an admin token: every tenant, and the operator endpoints")
	create.Flags().StringVar(&co.name, "name", "", "a note for people (at most 128 bytes)")
	var lo tokensListOptions
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List tokens (never their secrets), revoked ones too",
		Args:  cobra.NoArgs,
		RunE: withStoreAs(false, func([]string) error { return lo.Validate() }, func(cmd *cobra.Command, s *auth.Store) error {
			all, err := s.List(cmd.Context())
			if err != nil {
				return err
			}
			if lo.json {
				if all == nil {
					all = []auth.Token{}
				}
				return render.JSON(cmd.OutOrStdout(), map[string]any{"tokens": all})
			}
			return render.Tokens(cmd.OutOrStdout(), all)
		}),
	}
	list.Flags().BoolVar(&lo.json, "json", false, "print JSON")
	var ro tokensRevokeOptions
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token at once",
		Args:  cobra.ExactArgs(1),
		RunE: withStoreAs(false, func(args []string) error {
			ro.token = args[0]
			return ro.Validate()
		}, func(cmd *cobra.Command, s *auth.Store) error {
			t, err := s.Revoke(cmd.Context(), ro.id)
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
