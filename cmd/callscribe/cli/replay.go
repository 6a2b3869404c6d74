package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

func (a *app) replayCommand() *cobra.Command {
	var from, to, tenant, state, targetName string
	var allowProduction bool
	cmd := &cobra.Command{
		Use:   "replay --from DATE --to DATE --target NAME [--tenant T] [--state committed] [--allow-production]",
		Short: "Re-drive historical recordings and re-deliver their action sets (original keys) to a named, non-production CRM target",
		Long: `replay re-ingests each recording in the window by its business key (converging on
its row), lets unfinished ones run through the pipeline, and delivers every
committed action set again to the named target of crm_targets with its
original idempotency key. It reports recordings replayed, audit events
appended, new action versions created (must be 0) and CRM effects created
(0 against a target that already has the sets). A target marked
production: true is refused unless --allow-production is given.
Dates are YYYY-MM-DD (UTC) or RFC 3339; --to is exclusive.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" || targetName == "" {
				return errors.New("give --from, --to and --target")
			}
			start, err := parseDay(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			end, err := parseDay(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			tc, ok := a.config.CRMTargets[targetName]
			if !ok {
				names := make([]string, 0, len(a.config.CRMTargets))
				for n := range a.config.CRMTargets {
					names = append(names, n)
				}
				sort.Strings(names)
				return fmt.Errorf("--target %q is not in crm_targets (configured: %s)", targetName, strings.Join(names, ", "))
			}
			tgt, err := connector.New(tc.Config)
			if err != nil {
				return fmt.Errorf("crm_targets.%s: %w", targetName, err)
			}
			e, err := a.openPipeline(cmd.Context(), pipelineCaps{})
			if err != nil {
				return err
			}
			defer e.Close()
			var bar progress
			rep, err := e.outbox.Replay(cmd.Context(), outbox.ReplayOptions{
				From: start, To: end, TenantID: tenant, State: ledger.State(state),
				Target: tgt, TargetName: targetName, Production: tc.Production, AllowProduction: allowProduction,
				Reingest: func(ctx context.Context, r ledger.Recording) error {
					_, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: r.TenantID, CallID: r.CallID, Audio: r.AudioURI,
						Lane: r.Lane, Model: r.Model, Language: r.Language, StartedAt: r.StartedAt})
					return err
				},
				Progress: func(done, total int) {
					if bar == nil {
						bar = newProgress(a.env.Stderr, "replaying", int64(total), progressCount)
					}
					_ = bar.Set(done)
				},
			})
			if bar != nil {
				_ = bar.Finish()
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "replay to %s, %s .. %s\n", targetName, start.Format(time.RFC3339), end.Format(time.RFC3339))
			fmt.Fprintf(out, "  recordings replayed:          %d\n", rep.Recordings)
			fmt.Fprintf(out, "  audit events appended:        %d\n", rep.AuditEventsAppended)
			fmt.Fprintf(out, "  new action versions created:  %d (must be 0)\n", rep.NewActionVersions)
			fmt.Fprintf(out, "  CRM effects created:          %d (0 against a target that already had them; %d answered as replays)\n",
				rep.CRMEffectsCreated, rep.CRMReplays)
			for _, p := range rep.Problems {
				fmt.Fprintln(a.env.Stderr, "problem:", p)
			}
			if rep.NewActionVersions != 0 {
				return fmt.Errorf("replay created %d new action versions: business state changed", rep.NewActionVersions)
			}
			if len(rep.Problems) > 0 {
				return fmt.Errorf("%d recordings or deliveries could not be replayed (listed above)", len(rep.Problems))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "first ingest day (YYYY-MM-DD, UTC) or instant (RFC 3339)")
	f.StringVar(&to, "to", "", "end of the window, exclusive")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.StringVar(&state, "state", string(ledger.StateCommitted), "only recordings in this state")
	f.StringVar(&targetName, "target", "", "a name from crm_targets")
	f.BoolVar(&allowProduction, "allow-production", false, "allow a target marked production")
	return cmd
}

func parseDay(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither YYYY-MM-DD nor RFC 3339", s)
	}
	return t, nil
}
