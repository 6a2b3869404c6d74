package render

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/callscribe/callscribe/ledger"
)

// CallRecording is one recording of a call with its whole history, as
// `jobs show` prints it.
type CallRecording struct {
	Recording ledger.Recording `json:"recording"`
	Events    []ledger.Event   `json:"events"`
	// Manifests: the batch manifests the recording was an item of, with
	// their keys and the item's key and state.
	Manifests []ledger.ManifestItem `json:"manifests"`
}

// CallRecordings prints a call's recordings, each with its manifests and
// its event history, as `jobs show` does.
func CallRecordings(w io.Writer, all []CallRecording) {
	for _, s := range all {
		r := s.Recording
		fmt.Fprintf(w, "recording %s  %s\n  state %s  attempt %d  lane %s  deadline %s\n  provider %s %s\n",
			r.ID, Printable(r.BusinessKey), r.State, r.Attempt, r.Lane, Time(r.Deadline), Printable(r.Provider), Printable(r.ProviderID))
		fmt.Fprint(w, ManifestLines(s.Manifests))
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SEQ\tAT\tFROM\tTO\tATTEMPT\tCLASS\tRETRY-AFTER\tREASON")
		for _, ev := range s.Events {
			ra := ""
			if ev.RetryAfter != nil {
				ra = fmt.Sprintf("%q", *ev.RetryAfter)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", ev.Seq, ev.At.Format("15:04:05.000"), OrDash(string(ev.Prior)),
				ev.New, ev.Attempt, OrDash(Printable(ev.ResponseClass)), OrDash(ra), Printable(ev.Reason))
		}
		_ = tw.Flush()
	}
}

// Recordings prints the table of `jobs list`.
func Recordings(w io.Writer, recs []ledger.Recording) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tCALL\tSTATE\tATTEMPT\tLANE\tUPDATED")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.TenantID, r.CallID, r.State, r.Attempt, r.Lane, Time(r.UpdatedAt))
	}
	return tw.Flush()
}
