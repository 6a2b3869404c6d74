package render

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
)

// Tokens prints the table of `tokens list` (never a secret).
func Tokens(w io.Writer, all []auth.Token) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tNAME\tCREATED\tREVOKED")
	for _, t := range all {
		who, revoked := t.Tenant, "-"
		if t.Admin {
			who = "(admin)"
		}
		if t.RevokedAt != nil {
			revoked = t.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", t.ID, Printable(who), Printable(t.Name), t.CreatedAt.Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}
