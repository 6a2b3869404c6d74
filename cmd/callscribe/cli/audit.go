package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/ledger"
)

// auditCommand is `callscribe scopes audit`: the exact accounting of
// submissions against cooldowns (ledger.SubmissionAccounting).
func (a *commands) auditCommand() *cobra.Command {
	var since time.Duration
	var tenants []string
	var asJSON bool
	c := &cobra.Command{
		Use:   "audit [--since 24h] [--tenant T]... [--json]",
		Short: "Submissions against cooldowns, exactly: those that ignored a cooldown their admission knew of (must be 0) and those in flight when one was announced",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			from := time.Now().Add(-since)
			acc, err := e.Ledger.SubmissionAccounting(cmd.Context(), tenantsOrAll(tenants), from)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"since": from.UTC(), "accounting": acc})
			}
			writeAccounting(out, acc)
			return nil
		},
	}
	c.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back")
	c.Flags().StringSliceVar(&tenants, "tenant", nil, "only these tenants (default: all)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// tenantsOrAll is nil (every tenant) for an empty list.
func tenantsOrAll(ts []string) []string {
	if len(ts) == 0 {
		return nil
	}
	return ts
}

// writeAccounting prints acc for people.
func writeAccounting(w io.Writer, acc ledger.CooldownAccounting) {
	fmt.Fprintf(w, "submissions:                 %d (%d answered 429)\n", acc.Submissions, acc.Throttled)
	fmt.Fprintf(w, "ignored a known cooldown:    %d (must be 0 where enforced; %d of them answered 429)\n", acc.IgnoredKnownCooldown, acc.ThrottledIgnored)
	fmt.Fprintf(w, "in flight at an announcement: %d (allowed; longest admission-to-send gap among them %s)\n", acc.InFlight, acc.InFlightGapMax)
	fmt.Fprintf(w, "admission-to-send gap:       p50 %s, p99 %s, max %s (over %d sent)\n", acc.GapP50, acc.GapP99, acc.GapMax, acc.Sent)
	for _, c := range acc.Ignored {
		mode := "enforced"
		if c.Observe {
			mode = "observed"
		}
		fmt.Fprintf(w, "  ignored (%s): %s/%s scope %s admitted at %s with seq %d; offer %d deferred it until %s\n", mode,
			printable(c.TenantID), printable(c.CallID), printable(c.Scope), c.AdmittedAt.Format(time.RFC3339Nano), c.AdmittedSeq,
			c.IgnoredSeq, c.IgnoredNotBefore.Format(time.RFC3339Nano))
	}
}
