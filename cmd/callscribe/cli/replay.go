package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/progress"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// replayPoll is how often `replay --wait` reads its run.
const replayPoll = 500 * time.Millisecond

// replayOptions are the flags of `replay` and its subcommands.
type replayOptions struct {
	from, to, tenant, state, target string
	allowProduction, wait, json     bool
	maxRate                         float64
}

// followFlags defines --wait and --json, the flags of the commands that
// follow a run (replay, replay resume).
func (o *replayOptions) followFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.wait, "wait", false, "work the replay queue in this process and follow the run to its end (default: on a terminal)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the run as JSON")
}

// waitByDefault sets --wait when it was not given: on when stderr is a
// terminal.
func (o *replayOptions) waitByDefault(cmd *cobra.Command, stderr io.Writer) {
	if !cmd.Flags().Changed("wait") {
		o.wait = progress.IsTerminal(stderr)
	}
}

// Validate checks the flags of a new run, naming the flag at fault.
func (o replayOptions) Validate(targets map[string]config.CRMConfig) (from, to time.Time, err error) {
	if o.from == "" || o.to == "" || o.target == "" {
		return from, to, errors.New("give --from, --to and --target")
	}
	if from, err = parseDay(o.from); err != nil {
		return from, to, fmt.Errorf("--from: %w", err)
	}
	if to, err = parseDay(o.to); err != nil {
		return from, to, fmt.Errorf("--to: %w", err)
	}
	if !to.After(from) {
		return from, to, fmt.Errorf("--to %s is not after --from %s", o.to, o.from)
	}
	if _, ok := targets[o.target]; !ok {
		names := slices.Sorted(maps.Keys(targets))
		return from, to, fmt.Errorf("--target %q is not in crm_targets (configured: %s)", o.target, strings.Join(names, ", "))
	}
	if o.maxRate < 0 || o.maxRate > 10000 {
		return from, to, fmt.Errorf("--max-rate %g: want 0 (no ceiling) to 10000 sends a second", o.maxRate)
	}
	if o.state != "" && !slices.Contains(ledger.States(), ledger.State(o.state)) {
		return from, to, fmt.Errorf("--state %q is not one of %v", o.state, ledger.States())
	}
	return from, to, nil
}

func (a *commands) replayCommand() *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay --from DATE --to DATE --target NAME [--tenant T] [--state committed] [--max-rate N] [--wait] [--json]",
		Short: "Replay historical recordings into a named, non-production CRM target as a durable, throttled, resumable run",
		Long: `replay records a replay run and enqueues its work as River jobs of the replay
queue, a chunk of recordings per transaction: each recording in the window
is re-driven (an unfinished one re-ingested by its business key, so the
pipeline runs it under its normal admission) and each of its committed
action sets is delivered again to the named target of crm_targets with its
original idempotency key, through the target's own scope (its deferral and
window) exactly as the dispatcher delivers, retried on 429 and 5xx until
the target's delivery deadline. A crash or Ctrl-C loses nothing: the run
resumes where it stopped (replay resume RUN), and the workers of serve or
worker carry on its jobs.

With --wait (the default on a terminal) this process works the replay
queue itself, follows the run with a progress bar and prints its report;
without it, it prints the run's id once its work is enqueued.
--max-rate caps the run's sends per second below what the target allows.
A target marked production: true is refused unless --allow-production.
Dates are YYYY-MM-DD (UTC) or RFC 3339; --to is exclusive.

  callscribe replay status [RUN]   the run's figures (the newest runs without RUN)
  callscribe replay resume RUN     finish enqueueing a stopped run, and follow it
  callscribe replay cancel RUN     cancel a run's pending deliveries`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.waitByDefault(cmd, a.Env.Stderr)
			from, to, err := o.Validate(a.Config.CRMTargets)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			e, stop, err := a.OpenReplay(ctx, o.wait)
			if err != nil {
				return err
			}
			defer stop()
			id, err := e.Outbox.ReplayStart(ctx, outbox.ReplayStartOptions{From: from, To: to, TenantID: o.tenant,
				State: ledger.State(o.state), Target: o.target, AllowProduction: o.allowProduction, StartedBy: startedBy(),
				MaxRate: o.maxRate})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Env.Stderr, "replay run %d to %s: %s .. %s (status: callscribe replay status %d; resume: callscribe replay resume %d)\n",
				id, o.target, from.Format(time.RFC3339), to.Format(time.RFC3339), id, id)
			return a.followReplay(ctx, cmd.OutOrStdout(), e, id, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "first ingest day (YYYY-MM-DD, UTC) or instant (RFC 3339)")
	f.StringVar(&o.to, "to", "", "end of the window, exclusive")
	f.StringVar(&o.tenant, "tenant", "", "only this tenant")
	f.StringVar(&o.state, "state", string(ledger.StateCommitted), "only recordings in this state")
	f.StringVar(&o.target, "target", "", "a name from crm_targets")
	f.BoolVar(&o.allowProduction, "allow-production", false, "allow a target marked production")
	f.Float64Var(&o.maxRate, "max-rate", 0, "at most this many sends a second to the target (0: only the target's own signals limit it)")
	o.followFlags(cmd)
	cmd.AddCommand(a.replayStatusCommand(), a.replayResumeCommand(), a.replayCancelCommand())
	return cmd
}

func (a *commands) replayStatusCommand() *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "status [RUN]",
		Short: "Show a replay run's state and figures, or the newest runs",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id int64
			if len(args) == 1 {
				var err error
				if id, err = runID(args[0]); err != nil {
					return err
				}
			}
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				runs, err := e.Outbox.ReplayRuns(cmd.Context(), false, limit)
				if err != nil {
					return err
				}
				if asJSON {
					return writeReplayJSON(out, runs)
				}
				if len(runs) == 0 {
					fmt.Fprintln(out, "no replay runs")
				}
				for _, r := range runs {
					fmt.Fprintf(out, "run %d  %-11s  to %s  %s .. %s  recordings %d/%d  deliveries %d (pending %d, dead %d)\n",
						r.ID, r.State, r.Target, r.From.Format(time.DateOnly), r.To.Format(time.DateOnly),
						r.Report.RecordingsReplayed, r.Enumerated, r.Report.Deliveries, r.Report.Pending, r.Report.Dead)
				}
				return nil
			}
			run, err := e.Outbox.ReplayRunByID(cmd.Context(), id)
			if err != nil {
				return err
			}
			if asJSON {
				return writeReplayJSON(out, run)
			}
			printReplay(out, run)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().IntVar(&limit, "limit", 20, "how many runs to list without RUN")
	return cmd
}

func (a *commands) replayResumeCommand() *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "resume RUN [--wait] [--json]",
		Short: "Finish enqueueing a stopped replay run (a crash, Ctrl-C) and, with --wait, follow it to its end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.waitByDefault(cmd, a.Env.Stderr)
			id, err := runID(args[0])
			if err != nil {
				return err
			}
			e, stop, err := a.OpenReplay(cmd.Context(), o.wait)
			if err != nil {
				return err
			}
			defer stop()
			run, err := e.Outbox.ReplayRunByID(cmd.Context(), id)
			if err != nil {
				return err
			}
			if _, ok := a.Config.CRMTargets[run.Target]; !ok {
				return fmt.Errorf("replay run %d delivers to %q, which is not in this configuration's crm_targets", id, run.Target)
			}
			return a.followReplay(cmd.Context(), cmd.OutOrStdout(), e, id, o)
		},
	}
	o.followFlags(cmd)
	return cmd
}

func (a *commands) replayCancelCommand() *cobra.Command {
	var asJSON bool
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel RUN [--reason TEXT] [--json]",
		Short: "Cancel a replay run: its pending deliveries are cancelled, its jobs end at their next turn",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := runID(args[0])
			if err != nil {
				return err
			}
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			n, err := e.Outbox.ReplayCancel(cmd.Context(), id, cmp.Or(reason, "cancelled by "+startedBy()))
			if err != nil {
				return err
			}
			if asJSON {
				return writeReplayJSON(cmd.OutOrStdout(), map[string]any{"run": id, "state": outbox.RunCancelled, "deliveries_cancelled": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replay run %d cancelled: %d pending deliveries cancelled\n", id, n)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the run)")
	return cmd
}

// followReplay enumerates run id (a chunk per transaction; resumes after
// the last one) and, with o.wait, works the replay queue in this process
// until the run ends, showing its progress, then prints its report. An
// interrupted follow leaves the run to `replay resume` and the workers.
func (a *commands) followReplay(ctx context.Context, out io.Writer, e *app.Pipeline, id int64, o replayOptions) error {
	if o.wait {
		if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("starting the replay workers: %w", err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.Jobs.Config().ShutdownGrace)
			defer cancel()
			_ = e.Client.Stop(stopCtx)
		}()
	}
	var bar progress.Reporter
	enqueued := func(n int64) {
		if bar == nil {
			bar = progress.New(a.Env.Stderr, "enqueueing", -1, progress.Count)
		}
		_ = bar.Set64(n)
	}
	err := e.Outbox.ReplayEnumerate(ctx, e.Client, id, enqueued)
	if bar != nil {
		_ = bar.Finish()
		bar = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while enqueueing replay run %d: what was enqueued stays; finish it with: callscribe replay resume %d", id, id)
		}
		return err
	}
	if !o.wait {
		run, err := e.Outbox.ReplayRunByID(ctx, id)
		if err != nil {
			return err
		}
		if o.json {
			return writeReplayJSON(out, run)
		}
		fmt.Fprintf(out, "replay run %d enqueued: %d recordings; the workers of serve or worker deliver it (callscribe replay status %d)\n",
			id, run.Enumerated, id)
		return nil
	}
	// A bar of recordings re-driven, then one of deliveries settled.
	stage := ""
	tick := time.NewTicker(replayPoll)
	defer tick.Stop()
	for {
		run, err := e.Outbox.ReplayProgress(ctx, id)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil {
			rep := run.Report
			switch {
			case run.State == outbox.RunEnumerating:
			case rep.RecordingsReplayed < run.Enumerated:
				if stage == "" {
					stage, bar = "re-driving", progress.New(a.Env.Stderr, "re-driving", run.Enumerated, progress.Count)
				}
				_ = bar.Set64(rep.RecordingsReplayed)
			case rep.Deliveries > 0:
				if stage != "delivering" {
					if bar != nil {
						_ = bar.Set64(run.Enumerated)
						_ = bar.Finish()
					}
					stage, bar = "delivering", progress.New(a.Env.Stderr, "delivering", rep.Deliveries, progress.Count)
				}
				_ = bar.Set64(rep.Deliveries - rep.Pending)
			}
			if !run.Active() {
				if bar != nil {
					_ = bar.Finish()
				}
				if run, err = e.Outbox.ReplayRunByID(ctx, id); err != nil {
					return err
				}
				return a.replayReport(out, run, o.json)
			}
		}
		select {
		case <-ctx.Done():
			if bar != nil {
				_ = bar.Finish()
			}
			return fmt.Errorf("stopped following replay run %d; it is recorded and its jobs wait for a worker: callscribe replay status %d, callscribe replay resume %d", id, id, id)
		case <-tick.C:
		}
	}
}

// replayReport prints a finished run's report and fails when it shows
// business state changed or deliveries that died.
func (a *commands) replayReport(out io.Writer, run outbox.ReplayRun, asJSON bool) error {
	if asJSON {
		if err := writeReplayJSON(out, run); err != nil {
			return err
		}
	} else {
		printReplay(out, run)
	}
	rep := run.Report
	switch {
	case rep.NewActionVersions != 0:
		return fmt.Errorf("replay run %d created %d new action versions: business state changed", run.ID, rep.NewActionVersions)
	case rep.Sends.IgnoredKnownCooldown != 0:
		return fmt.Errorf("replay run %d sent %d deliveries inside a cooldown it knew of", run.ID, rep.Sends.IgnoredKnownCooldown)
	case rep.Dead != 0:
		return fmt.Errorf("replay run %d: %d deliveries are dead (listed above with why)", run.ID, rep.Dead)
	case run.State == outbox.RunCancelled:
		return fmt.Errorf("replay run %d was cancelled: %s", run.ID, run.Reason)
	}
	return nil
}

// printReplay prints a run for people.
func printReplay(w io.Writer, r outbox.ReplayRun) {
	rep := r.Report
	fmt.Fprintf(w, "replay run %d to %s (scope %s), %s .. %s, state %s\n", r.ID, r.Target, r.Scope,
		r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.State)
	fmt.Fprintf(w, "  started by %s at %s", r.StartedBy, r.CreatedAt.Format(time.RFC3339))
	if r.FinishedAt != nil {
		fmt.Fprintf(w, ", ended %s (%s)", r.FinishedAt.Format(time.RFC3339), r.FinishedAt.Sub(r.CreatedAt).Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	if r.MaxRate > 0 {
		fmt.Fprintf(w, "  rate ceiling:                 %g sends/s\n", r.MaxRate)
	}
	fmt.Fprintf(w, "  recordings replayed:          %d of %d enumerated\n", rep.RecordingsReplayed, r.Enumerated)
	fmt.Fprintf(w, "  audit events appended:        %d\n", rep.AuditEventsAppended)
	fmt.Fprintf(w, "  new action versions created:  %d (must be 0)\n", rep.NewActionVersions)
	fmt.Fprintf(w, "  deliveries:                   %d (%d pending)\n", rep.Deliveries, rep.Pending)
	fmt.Fprintf(w, "  CRM effects created:          %d (%d answered as replays: the target already had them)\n", rep.CRMEffectsCreated, rep.AnsweredAsReplays)
	fmt.Fprintf(w, "  throttled and retried:        %d (and %d transient failures retried; %d tries withdrawn unsent)\n", rep.Throttled, rep.Transient, rep.Withdrawn)
	fmt.Fprintf(w, "  sent inside a known cooldown: %d (must be 0; %d were in flight when one was announced)\n",
		rep.Sends.IgnoredKnownCooldown, rep.Sends.InFlight)
	fmt.Fprintf(w, "  dead:                         %d\n", rep.Dead)
	if rep.Cancelled > 0 {
		fmt.Fprintf(w, "  cancelled:                    %d (%s)\n", rep.Cancelled, r.Reason)
	}
	for _, d := range rep.DeadList {
		fmt.Fprintf(w, "    dead %s (%s): %s\n", d.IdempotencyKey, d.LastClass, d.Reason)
	}
}

func writeReplayJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runID parses a run's id.
func runID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("run %q: want a run's number (callscribe replay status lists them)", s)
	}
	return id, nil
}

// startedBy is who runs this command: user@host.
func startedBy() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host
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
