package cli

import (
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
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

// retentionOptions are the flags of `callscribe retention run` (and
// `ledger purge`).
type retentionOptions struct{ dryRun, json bool }

// Validate has nothing to refuse: both flags are switches, and any
// combination runs.
func (o retentionOptions) Validate() error { return nil }

func (a *commands) retentionRunCommand(use, short string) *cobra.Command {
	var o retentionOptions
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
		RunE: a.withPipeline(&o, func(cmd *cobra.Command, e *app.Pipeline) error {
			out := cmd.OutOrStdout()
			if o.dryRun {
				pre, err := e.Jobs.PreviewRetention(cmd.Context())
				if err != nil {
					return err
				}
				return render.RetentionPreview(out, e.Jobs.RetentionPolicy(), pre, o.json)
			}
			rep, err := e.Jobs.RunRetention(cmd.Context(), "callscribe retention run")
			if err != nil {
				return err
			}
			return render.RetentionReport(out, rep, o.json)
		}),
	}
	run.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be removed, per tenant; change nothing")
	run.Flags().BoolVar(&o.json, "json", false, "print JSON")
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
