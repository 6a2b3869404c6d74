package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/callscribe/callscribe/ledger"
)

// ManifestItem is an item of a batch manifest with the state of its
// recording, as `batches show` prints it.
type ManifestItem struct {
	ledger.ManifestItem
	RecordingState ledger.State `json:"recording_state"`
}

// ManifestLines are the lines `jobs show` prints for a recording's
// manifests.
func ManifestLines(items []ledger.ManifestItem) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "  manifest %s (%s): item %d, key %s, %s", Printable(it.ManifestKey), it.ManifestState, it.Position,
			Printable(it.BusinessKey), it.State)
		if it.Reason != "" {
			fmt.Fprintf(&b, " (%s)", Printable(it.Reason))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Manifests prints the table of `batches list`.
func Manifests(w io.Writer, ms []ledger.Manifest) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKEY\tSTATE\tITEMS\tAUDIO\tVENDOR BATCH\tRESUBMITS\tCREATED")
	for _, m := range ms {
		resub := "-"
		if m.ResubmissionOf != nil {
			resub = m.ResubmissionOf.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0fs\t%s\t%s\t%s\n", m.ID, Printable(m.Key), m.State, m.Items, m.AudioSeconds,
			OrDash(Printable(m.VendorBatchID)), resub, Time(m.CreatedAt))
	}
	return tw.Flush()
}

// Manifest prints a manifest, its items and its history, as `batches
// show` does.
func Manifest(w io.Writer, m ledger.Manifest, items []ManifestItem, evs []ledger.ManifestEvent) error {
	fmt.Fprintf(w, "manifest %s  %s\n  state %s  tenant %s  provider %s  model %s  scope %s\n  %d items, %.0f s of audio, vendor batch %s\n",
		m.ID, Printable(m.Key), m.State, Printable(m.TenantID), m.Provider, Printable(m.Model), Printable(m.Scope), m.Items, m.AudioSeconds,
		OrDash(Printable(m.VendorBatchID)))
	if m.ResubmissionOf != nil {
		fmt.Fprintf(w, "  resubmits the unfinished items of manifest %s\n", m.ResubmissionOf)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tITEM KEY\tITEM\tRECORDING\tRECORDING STATE\tVENDOR ID\tREASON")
	for _, it := range items {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Position, Printable(it.BusinessKey), it.State, it.RecordingID,
			OrDash(string(it.RecordingState)), OrDash(Printable(it.ProviderID)), OrDash(Printable(it.Reason)))
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tEVENT\tREASON")
	for _, ev := range evs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", ev.At.Format("15:04:05.000"), ev.Kind, Printable(ev.Reason))
	}
	return tw.Flush()
}
