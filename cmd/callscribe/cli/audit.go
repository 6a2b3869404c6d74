package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
)

// auditOptions are the flags of `callscribe scopes audit`.
type auditOptions struct {
	since   time.Duration
	tenants []string
	json    bool
}

// Validate refuses a window that does not reach back.
func (o auditOptions) Validate() error {
	return wantSince(o.since)
}

// auditCommand is `callscribe scopes audit`: the exact accounting of
// submissions against cooldowns (ledger.SubmissionAccounting).
func (a *commands) auditCommand() *cobra.Command {
	var o auditOptions
	c := &cobra.Command{
		Use:   "audit [--since 24h] [--tenant T]... [--json]",
		Short: "Submissions against cooldowns, exactly: those that ignored a cooldown their admission knew of (must be 0) and those in flight when one was announced",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&o, func(cmd *cobra.Command, e *app.Pipeline) error {
			from := time.Now().Add(-o.since)
			acc, err := e.Ledger.SubmissionAccounting(cmd.Context(), tenantsOrAll(o.tenants), from)
			if err != nil {
				return err
			}
			if o.json {
				return render.JSON(cmd.OutOrStdout(), map[string]any{"since": from.UTC(), "accounting": acc})
			}
			render.Accounting(cmd.OutOrStdout(), acc)
			return nil
		}),
	}
	c.Flags().DurationVar(&o.since, "since", 24*time.Hour, "how far back")
	c.Flags().StringSliceVar(&o.tenants, "tenant", nil, "only these tenants (default: all)")
	c.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return c
}

// tenantsOrAll is nil (every tenant) for an empty list.
func tenantsOrAll(ts []string) []string {
	if len(ts) == 0 {
		return nil
	}
	return ts
}
