package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/ledger"
)

func (a *app) ledgerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Maintain the durable record",
	}
	var olderThan time.Duration
	var batch int
	purge := &cobra.Command{
		Use:   "purge",
		Short: "Remove whole histories of terminal recordings older than the retention age, and record that it did",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.config.DatabaseURL == "" {
				return errNoDatabase
			}
			pool, err := connect(cmd.Context(), a.config.DatabaseURL)
			if err != nil {
				return err
			}
			defer pool.Close()
			l, err := ledger.New(pool, &ledger.Config{Logger: a.logger, Retention: a.config.Ledger.Retention})
			if err != nil {
				return err
			}
			res, err := l.RetentionPurge(cmd.Context(), ledger.PurgeOpts{OlderThan: olderThan, BatchSize: batch, Reason: "callscribe ledger purge"})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d recordings (%d events) last changed before %s, in %d batches\n",
				res.Recordings, res.Events, res.Cutoff.Format(time.RFC3339), res.Batches)
			return nil
		},
	}
	purge.Flags().DurationVar(&olderThan, "older-than", 0, "retention age (default: ledger.retention from the configuration, 2160h)")
	purge.Flags().IntVar(&batch, "batch", ledger.PurgeBatchDefault, "recordings removed per transaction")
	cmd.AddCommand(purge)
	return cmd
}
