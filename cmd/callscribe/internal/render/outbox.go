package render

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/callscribe/callscribe/outbox"
)

// Outbox prints the rows, counters and backlog of `outbox list`.
func Outbox(w io.Writer, l outbox.Listing) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKEY\tTARGET\tSTATE\tTRIES\tLAST CLASS\tCRM ID\tDEADLINE")
	for _, r := range l.Rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.IdempotencyKey, r.Target, r.State, r.Attempts,
			OrDash(Printable(r.LastClass)), OrDash(Printable(r.CRMID)), r.Deadline.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	names := make([]string, 0, len(l.Counters))
	for n := range l.Counters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "%s %d\n", n, l.Counters[n])
	}
	fmt.Fprintf(w, "pending %d\n", l.Pending)
	age := ""
	if l.Pending > 0 {
		age = fmt.Sprintf(" (%s)", time.Duration(l.OldestPendingAgeSeconds)*time.Second)
	}
	fmt.Fprintf(w, "oldest_pending_age_seconds %d%s\n", l.OldestPendingAgeSeconds, age)
	return nil
}
