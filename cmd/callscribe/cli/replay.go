package cli

import (
	"cmp"
	"context"
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
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// replayPoll is how often `replay --wait` reads its run.
const replayPoll = 500 * time.Millisecond

// followOptions are the flags of the commands that follow a run (replay,
// replay resume): --wait and --json.
type followOptions struct{ wait, json bool }

// followFlags defines --wait and --json.
func (o *followOptions) followFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.wait, "wait", false, "work the replay queue in this process and follow the run to its end (default: on a terminal)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the run as JSON")
}

// waitByDefault sets --wait when it was not given: on when stderr is a
// terminal.
func (o *followOptions) waitByDefault(cmd *cobra.Command, stderr io.Writer) {
	if !cmd.Flags().Changed("wait") {
		o.wait = progress.IsTerminal(stderr)
	}
}

// replayOptions are the flags of `callscribe replay`, a new run.
type replayOptions struct {
	followOptions
	from, to, tenant, state, target string
	allowProduction                 bool
	maxRate                         float64
	// targets are the configuration's crm_targets, which --target names.
	targets map[string]config.CRMConfig
	// fromTime and toTime are from and to, parsed by Validate.
	fromTime, toTime time.Time
}

// Validate checks the flags of a new run, naming the flag at fault, and
// parses --from and --to.
func (o *replayOptions) Validate() (err error) {
	if o.from == "" || o.to == "" || o.target == "" {
		return errors.New("give --from, --to and --target")
	}
	if o.fromTime, err = parseDay(o.from); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if o.toTime, err = parseDay(o.to); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if !o.toTime.After(o.fromTime) {
		return fmt.Errorf("--to %s is not after --from %s", o.to, o.from)
	}
	if _, ok := o.targets[o.target]; !ok {
		names := slices.Sorted(maps.Keys(o.targets))
		return fmt.Errorf("--target %q is not in crm_targets (configured: %s)", o.target, strings.Join(names, ", "))
	}
	if o.maxRate < 0 || o.maxRate > 10000 {
		return fmt.Errorf("--max-rate %g: want 0 (no ceiling) to 10000 sends a second", o.maxRate)
	}
	if o.state != "" && !slices.Contains(ledger.States(), ledger.State(o.state)) {
		return fmt.Errorf("--state %q is not one of %v", o.state, ledger.States())
	}
	return nil
}

// replayStatusOptions are the argument and flags of `callscribe replay
// status`.
type replayStatusOptions struct {
	run   []string // RUN, optional: without it, the newest runs
	id    int64    // RUN parsed by Validate
	json  bool
	limit int
}

// Validate parses RUN, when given, and refuses a negative --limit.
func (o *replayStatusOptions) Validate() (err error) {
	if len(o.run) == 1 {
		if o.id, err = runID(o.run[0]); err != nil {
			return err
		}
	}
	return wantLimit(o.limit)
}

// replayResumeOptions are the argument and flags of `callscribe replay
// resume`.
type replayResumeOptions struct {
	followOptions
	run string
	id  int64 // run parsed by Validate
}

// Validate parses RUN.
func (o *replayResumeOptions) Validate() (err error) {
	o.id, err = runID(o.run)
	return err
}

// replayCancelOptions are the argument and flags of `callscribe replay
// cancel`.
type replayCancelOptions struct {
	run, reason string
	id          int64 // run parsed by Validate
	json        bool
}

// Validate parses RUN.
func (o *replayCancelOptions) Validate() (err error) {
	o.id, err = runID(o.run)
	return err
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
			o.targets = a.Config.CRMTargets
			if err := o.Validate(); err != nil {
				return err
			}
			from, to := o.fromTime, o.toTime
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
			return a.followReplay(ctx, cmd.OutOrStdout(), e, id, o.followOptions)
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
	var o replayStatusOptions
	cmd := &cobra.Command{
		Use:   "status [RUN]",
		Short: "Show a replay run's state and figures, or the newest runs",
		Args:  cobra.MaximumNArgs(1),
		RunE: a.withPipelineArgs(func(args []string) validator {
			o.run = args
			return &o
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			out := cmd.OutOrStdout()
			if len(o.run) == 0 {
				runs, err := e.Outbox.ReplayRuns(cmd.Context(), false, o.limit)
				if err != nil {
					return err
				}
				if o.json {
					return render.JSON(out, runs)
				}
				render.ReplayRuns(out, runs)
				return nil
			}
			run, err := e.Outbox.ReplayRunByID(cmd.Context(), o.id)
			if err != nil {
				return err
			}
			if o.json {
				return render.JSON(out, run)
			}
			render.Replay(out, run)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print as JSON")
	cmd.Flags().IntVar(&o.limit, "limit", 20, "how many runs to list without RUN")
	return cmd
}

func (a *commands) replayResumeCommand() *cobra.Command {
	var o replayResumeOptions
	cmd := &cobra.Command{
		Use:   "resume RUN [--wait] [--json]",
		Short: "Finish enqueueing a stopped replay run (a crash, Ctrl-C) and, with --wait, follow it to its end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.waitByDefault(cmd, a.Env.Stderr)
			o.run = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			id := o.id
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
			return a.followReplay(cmd.Context(), cmd.OutOrStdout(), e, id, o.followOptions)
		},
	}
	o.followFlags(cmd)
	return cmd
}

func (a *commands) replayCancelCommand() *cobra.Command {
	var o replayCancelOptions
	cmd := &cobra.Command{
		Use:   "cancel RUN [--reason TEXT] [--json]",
		Short: "Cancel a replay run: its pending deliveries are cancelled, its jobs end at their next turn",
		Args:  cobra.ExactArgs(1),
		RunE: a.withPipelineArgs(func(args []string) validator {
			o.run = args[0]
			return &o
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			n, err := e.Outbox.ReplayCancel(cmd.Context(), o.id, cmp.Or(o.reason, "cancelled by "+startedBy()))
			if err != nil {
				return err
			}
			if o.json {
				return render.JSON(cmd.OutOrStdout(), map[string]any{"run": o.id, "state": outbox.RunCancelled, "deliveries_cancelled": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replay run %d cancelled: %d pending deliveries cancelled\n", o.id, n)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print as JSON")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why (recorded with the run)")
	return cmd
}

// followReplay enumerates run id (a chunk per transaction; resumes after
// the last one) and, with o.wait, works the replay queue in this process
// until the run ends, showing its progress, then prints its report. An
// interrupted follow leaves the run to `replay resume` and the workers.
func (a *commands) followReplay(ctx context.Context, out io.Writer, e *app.Pipeline, id int64, o followOptions) error {
	if o.wait {
		if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("starting the replay workers: %w", err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.Jobs.Config().ShutdownGrace)
			defer cancel()
			_ = e.Client.Stop(stopCtx)
			_ = e.Outbox.Drain(stopCtx) // the prompt deliveries of recordings it re-ran
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
			return render.JSON(out, run)
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
		if err := render.JSON(out, run); err != nil {
			return err
		}
	} else {
		render.Replay(out, run)
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
