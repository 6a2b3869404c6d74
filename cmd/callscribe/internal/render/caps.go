package render

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/callscribe/callscribe/capacity/orgcap"
)

// OrgCapRow is one line of `orgs list`: a stored cap, or a configured one
// (Source "config") of an organisation without a stored cap.
type OrgCapRow struct {
	orgcap.Cap
	// Source is "stored" (orgcap, set at run time) or "config"
	// (capacity.orgs).
	Source string `json:"source"`
}

// OrgCaps prints the table of `orgs list` and `campaigns list`: each cap,
// where it comes from, and its last change.
func OrgCaps(w io.Writer, rows []OrgCapRow, campaigns bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if campaigns {
		fmt.Fprintln(tw, "ORG\tCAMPAIGN\tLIMIT\tSOURCE\tUPDATED\tBY\tREASON")
	} else {
		fmt.Fprintln(tw, "ORG\tLIMIT\tSOURCE\tUPDATED\tBY\tREASON")
	}
	for _, r := range rows {
		updated, by, reason := "-", "-", "-"
		if r.Source == "stored" {
			updated, by = r.UpdatedAt.Format(time.RFC3339), Printable(r.UpdatedBy)
			if r.Reason != "" {
				reason = Printable(r.Reason)
			}
		}
		if campaigns {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Org, r.Campaign, r.Limit, r.Source, updated, by, reason)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Org, r.Limit, r.Source, updated, by, reason)
		}
	}
	return tw.Flush()
}

// CapChanges prints the audit trail of `orgs list --history`, newest
// first.
func CapChanges(w io.Writer, changes []orgcap.Change) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tORG\tCAMPAIGN\tFROM\tTO\tBY\tREASON")
	for _, c := range changes {
		from, camp, reason := "-", "-", "-"
		if c.PriorLimit != nil {
			from = strconv.Itoa(*c.PriorLimit)
		}
		if c.Campaign != "" {
			camp = c.Campaign
		}
		if c.Reason != "" {
			reason = Printable(c.Reason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.At.Format(time.RFC3339), c.Org, camp, from, c.Limit, Printable(c.By), reason)
	}
	return tw.Flush()
}
