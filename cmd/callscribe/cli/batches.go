package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/ledger"
)

// batchesCommand: the batch lane's manifests.
func (a *commands) batchesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "batches", Short: "The batch lane's manifests: their items and histories"}
	var state, tenant string
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--state S] [--tenant T] [--limit N] [--json]",
		Short: "Manifests, newest first: key, state, items, audio, the vendor's batch id, what it resubmits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			ms, err := e.Ledger.Manifests(cmd.Context(), ledger.ManifestFilter{State: ledger.ManifestState(state), TenantID: tenant, Limit: limit})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if ms == nil {
					ms = []ledger.Manifest{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(ms)
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKEY\tSTATE\tITEMS\tAUDIO\tVENDOR BATCH\tRESUBMITS\tCREATED")
			for _, m := range ms {
				resub := "-"
				if m.ResubmissionOf != nil {
					resub = m.ResubmissionOf.String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0fs\t%s\t%s\t%s\n", m.ID, printable(m.Key), m.State, m.Items, m.AudioSeconds,
					orDash(printable(m.VendorBatchID)), resub, fmtTime(m.CreatedAt))
			}
			return tw.Flush()
		},
	}
	f := list.Flags()
	f.StringVar(&state, "state", "", "only manifests in this state (formed, submitted, accepted, done, unbatched)")
	f.StringVar(&tenant, "tenant", "", "only this tenant's manifests")
	f.IntVar(&limit, "limit", 100, "at most this many")
	f.BoolVar(&asJSON, "json", false, "print the manifests as JSON")

	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID|KEY [--json]",
		Short: "A manifest: its items with their states (and their recordings' states), and its history",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			ctx := cmd.Context()
			id, perr := uuid.Parse(args[0])
			if perr != nil {
				m, err := e.Ledger.ManifestByKey(ctx, args[0])
				if err != nil {
					return err
				}
				id = m.ID
			}
			m, items, err := e.Ledger.Manifest(ctx, id)
			if err != nil {
				return err
			}
			evs, err := e.Ledger.ManifestEvents(ctx, id)
			if err != nil {
				return err
			}
			type shownItem struct {
				ledger.ManifestItem
				RecordingState ledger.State `json:"recording_state"`
			}
			shown := make([]shownItem, len(items))
			for i, it := range items {
				shown[i].ManifestItem = it
				if r, err := e.Ledger.Recording(ctx, it.RecordingID); err == nil {
					shown[i].RecordingState = r.State
				}
			}
			out := cmd.OutOrStdout()
			if showJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Manifest ledger.Manifest        `json:"manifest"`
					Items    []shownItem            `json:"items"`
					Events   []ledger.ManifestEvent `json:"events"`
				}{m, shown, evs})
			}
			fmt.Fprintf(out, "manifest %s  %s\n  state %s  tenant %s  provider %s  model %s  scope %s\n  %d items, %.0f s of audio, vendor batch %s\n",
				m.ID, printable(m.Key), m.State, printable(m.TenantID), m.Provider, printable(m.Model), printable(m.Scope), m.Items, m.AudioSeconds,
				orDash(printable(m.VendorBatchID)))
			if m.ResubmissionOf != nil {
				fmt.Fprintf(out, "  resubmits the unfinished items of manifest %s\n", m.ResubmissionOf)
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  #\tITEM KEY\tITEM\tRECORDING\tRECORDING STATE\tVENDOR ID\tREASON")
			for _, it := range shown {
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Position, printable(it.BusinessKey), it.State, it.RecordingID,
					orDash(string(it.RecordingState)), orDash(printable(it.ProviderID)), orDash(printable(it.Reason)))
			}
			_ = tw.Flush()
			tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  AT\tEVENT\tREASON")
			for _, ev := range evs {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", ev.At.Format("15:04:05.000"), ev.Kind, printable(ev.Reason))
			}
			return tw.Flush()
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print the manifest, its items and its events as JSON")
	cmd.AddCommand(list, show)
	return cmd
}

// manifestLines are the lines jobs show prints for a recording's manifests.
func manifestLines(items []ledger.ManifestItem) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "  manifest %s (%s): item %d, key %s, %s", printable(it.ManifestKey), it.ManifestState, it.Position,
			printable(it.BusinessKey), it.State)
		if it.Reason != "" {
			fmt.Fprintf(&b, " (%s)", printable(it.Reason))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
