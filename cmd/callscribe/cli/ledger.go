package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
)

// retentionCommand is `callscribe retention run`: the purge the worker
// runs periodically, or what it would remove.
func (a *commands) retentionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Remove the whole history of terminal recordings past their tenant's retention",
	}
	cmd.AddCommand(a.retentionRunCommand("run", "Run the retention purge now (the worker runs it every pipeline.retention_every)"))
	return cmd
}

func (a *commands) retentionRunCommand(use, short string) *cobra.Command {
	var dryRun, asJSON bool
	run := &cobra.Command{
		Use:   use,
		Short: short,
		Long: `Removes, for each terminal recording (committed, failed, expired) last
changed longer ago than its tenant's retention (pipeline.tenants.<id>.retention,
else ledger.retention, 90 days by default) and with no delivery still
pending: its events, transcript, action sets, outbox rows and their events,
the scope extensions it caused, and the row; then its audio object from the
recordings root (unless the tenant sets keep_audio, or another recording
still uses it). Each batch is recorded (retention_purges, retention_audio).
--dry-run prints what would be removed, per tenant, and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			out := cmd.OutOrStdout()
			if dryRun {
				pre, err := e.Jobs.PreviewRetention(cmd.Context())
				if err != nil {
					return err
				}
				return printRetentionPreview(out, e.Jobs.RetentionPolicy(), pre, asJSON)
			}
			rep, err := e.Jobs.RunRetention(cmd.Context(), "callscribe retention run")
			if err != nil {
				return err
			}
			return printRetentionReport(out, rep, asJSON)
		},
	}
	run.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, per tenant; change nothing")
	run.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return run
}

// ledgerCommand keeps `callscribe ledger purge`, now `retention run`.
func (a *commands) ledgerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Maintain the durable record",
	}
	cmd.AddCommand(a.retentionRunCommand("purge", "Same as `callscribe retention run`"))
	return cmd
}

func printRetentionPreview(w io.Writer, policy ledger.PurgeOpts, pre []ledger.TenantPreview, asJSON bool) error {
	if asJSON {
		tenants := map[string]string{}
		for id, d := range policy.Tenants {
			tenants[id] = d.String()
		}
		if pre == nil {
			pre = []ledger.TenantPreview{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"dry_run": true, "default_retention": policy.OlderThan.String(),
			"tenant_retention": tenants, "tenants": pre})
	}
	fmt.Fprintf(w, "dry run: nothing removed. Retention %s", policy.OlderThan)
	for _, id := range slices.Sorted(maps.Keys(policy.Tenants)) {
		fmt.Fprintf(w, ", %s %s", id, policy.Tenants[id])
	}
	fmt.Fprintln(w)
	if len(pre) == 0 {
		fmt.Fprintln(w, "nothing is past retention")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tCUTOFF\tRECORDINGS\tEVENTS\tTRANSCRIPTS\tACTION SETS\tOUTBOX ROWS\tOUTBOX EVENTS\tSCOPE EXTENSIONS\tAUDIO\tOLDEST")
	for _, p := range pre {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", printable(p.TenantID), p.Cutoff.Format(time.RFC3339),
			p.Recordings, p.Events, p.Transcripts, p.ActionSets, p.OutboxRows, p.OutboxEvents, p.Extensions, p.AudioObjects,
			p.Oldest.Format(time.RFC3339))
	}
	return tw.Flush()
}

func printRetentionReport(w io.Writer, rep jobs.RetentionReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"dry_run": false, "batches": rep.Batches, "recordings": rep.Recordings,
			"events": rep.Events, "transcripts": rep.Transcripts, "action_sets": rep.ActionSets,
			"outbox_rows": rep.OutboxRows, "outbox_events": rep.OutboxEvents, "scope_extensions": rep.Extensions,
			"audio": rep.Audio, "default_cutoff": rep.Cutoff})
	}
	var audio []string
	for _, k := range slices.Sorted(maps.Keys(rep.Audio)) {
		audio = append(audio, fmt.Sprintf("%d %s", rep.Audio[k], k))
	}
	if len(audio) == 0 {
		audio = []string{"none"}
	}
	fmt.Fprintf(w, "purged %d recordings (%d events, %d transcripts, %d action sets, %d outbox rows with %d events, %d scope extensions) in %d batches; audio: %s\n",
		rep.Recordings, rep.Events, rep.Transcripts, rep.ActionSets, rep.OutboxRows, rep.OutboxEvents, rep.Extensions,
		rep.Batches, strings.Join(audio, ", "))
	return nil
}
