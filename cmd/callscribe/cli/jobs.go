package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
)

// jobsShowOptions are the flags of `callscribe jobs show`.
type jobsShowOptions struct {
	tenant, call string
	json         bool
}

// Validate wants the call: --tenant and --call.
func (o jobsShowOptions) Validate() error {
	if o.tenant == "" || o.call == "" {
		return errors.New("give --tenant and --call")
	}
	return nil
}

// jobsListOptions are the flags of `callscribe jobs list`.
type jobsListOptions struct {
	state, tenant string
	json          bool
	limit         int
}

// Validate refuses an unknown --state and a negative --limit.
func (o jobsListOptions) Validate() error {
	if o.state != "" && !ledger.State(o.state).Valid() {
		return fmt.Errorf("--state %q is not a state (one of %v)", o.state, ledger.States())
	}
	return wantLimit(o.limit)
}

// redriveOptions are the argument and flag of `callscribe jobs retry` and
// `jobs revalidate`.
type redriveOptions struct {
	recording, reason string
	id                uuid.UUID // recording parsed by Validate
}

// Validate parses the recording's id.
func (o *redriveOptions) Validate() (err error) {
	if o.id, err = uuid.Parse(o.recording); err != nil {
		return fmt.Errorf("recording id %q: %w", o.recording, err)
	}
	return nil
}

// scopeOptions are the argument and flag of `callscribe scopes window` and
// `scopes resume`.
type scopeOptions struct {
	scope string
	json  bool
}

// Validate refuses an empty SCOPE.
func (o scopeOptions) Validate() error {
	if o.scope == "" {
		return errors.New("SCOPE: want a scope's name (scopes list lists them)")
	}
	return nil
}

func (a *commands) jobsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Look at recordings and their histories; re-drive reviewable ones"}

	var so jobsShowOptions
	show := &cobra.Command{
		Use:   "show --tenant T --call C",
		Short: "A call's recordings: the current row and the whole event history",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&so, func(cmd *cobra.Command, e *app.Pipeline) error {
			recs, err := e.Ledger.RecordingsByCall(cmd.Context(), so.tenant, so.call)
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				return fmt.Errorf("no recording of call %s/%s: %w", so.tenant, so.call, ledger.ErrNotFound)
			}
			var all []render.CallRecording
			for _, r := range recs {
				evs, err := e.Ledger.Events(cmd.Context(), r.ID)
				if err != nil {
					return err
				}
				items, err := e.Ledger.ManifestItemsOf(cmd.Context(), r.ID)
				if err != nil {
					return err
				}
				if items == nil {
					items = []ledger.ManifestItem{}
				}
				all = append(all, render.CallRecording{Recording: r, Events: evs, Manifests: items})
			}
			if so.json {
				return render.JSON(cmd.OutOrStdout(), all)
			}
			render.CallRecordings(cmd.OutOrStdout(), all)
			return nil
		}),
	}
	show.Flags().StringVar(&so.tenant, "tenant", "", "tenant id")
	show.Flags().StringVar(&so.call, "call", "", "call id")
	show.Flags().BoolVar(&so.json, "json", false, "print JSON")

	var lo jobsListOptions
	list := &cobra.Command{
		Use:   "list [--state S] [--tenant T]",
		Short: "List recordings",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&lo, func(cmd *cobra.Command, e *app.Pipeline) error {
			recs, err := e.Ledger.Recordings(cmd.Context(), ledger.RecordingFilter{State: ledger.State(lo.state), TenantID: lo.tenant, Limit: lo.limit})
			if err != nil {
				return err
			}
			if lo.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(recs)
			}
			return render.Recordings(cmd.OutOrStdout(), recs)
		}),
	}
	list.Flags().StringVar(&lo.state, "state", "", "only this state")
	list.Flags().StringVar(&lo.tenant, "tenant", "", "only this tenant")
	list.Flags().BoolVar(&lo.json, "json", false, "print JSON")
	list.Flags().IntVar(&lo.limit, "limit", 1000, "at most this many")

	retry := a.redriveCommand("retry RECORDING-ID",
		"Re-drive an expired or failed recording: back to eligible with a fresh deadline, recorded as its own event",
		"operator retry", (*jobs.Pipeline).Retry,
		func(r ledger.Recording) string {
			return fmt.Sprintf("recording %s is %s again, deadline %s", r.ID, r.State, render.Time(r.Deadline))
		})
	revalidate := a.redriveCommand("revalidate RECORDING-ID",
		"Take a committed recording back to validated to commit its actions again as the next action version",
		"operator revalidate", (*jobs.Pipeline).Revalidate,
		func(r ledger.Recording) string {
			return fmt.Sprintf("recording %s is %s again; a worker will commit the next action version", r.ID, r.State)
		})
	cmd.AddCommand(show, list, retry, revalidate)
	return cmd
}

func (a *commands) scopesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "scopes", Short: "Throttling scopes: deadlines, probes, pauses, concurrency windows"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every scope that was ever deferred, paused or windowed, with its window",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(nil, func(cmd *cobra.Command, e *app.Pipeline) error {
			ds, err := e.Ledger.ScopeDeferrals(cmd.Context())
			if err != nil {
				return err
			}
			w, closeW, err := a.ReadWindows()
			if err != nil {
				return err
			}
			defer closeW()
			windows := map[string]capacity.WindowState{}
			if w != nil {
				scopes, err := w.Scopes(cmd.Context())
				if err != nil {
					return err
				}
				for _, sc := range scopes {
					if windows[sc], err = w.State(cmd.Context(), sc); err != nil {
						return err
					}
				}
			}
			if err := render.Scopes(cmd.OutOrStdout(), ds, windows, time.Now()); err != nil {
				return err
			}
			if w == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "(no Redis URL configured: scope windows not shown)")
			}
			return nil
		}),
	}
	var wo scopeOptions
	window := &cobra.Command{
		Use:   "window SCOPE [--json]",
		Short: "A scope's concurrency window (size, target, in flight, waiting) and its changes with their causes, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wo.scope = args[0]
			if err := wo.Validate(); err != nil {
				return err
			}
			w, closeW, err := a.ReadWindows()
			if err != nil {
				return err
			}
			defer closeW()
			if w == nil {
				return errors.New(config.EnvRedisURL + " is not set (nor redis_url in --config): scope windows live in Redis")
			}
			st, err := w.State(cmd.Context(), wo.scope)
			if err != nil {
				return err
			}
			evs, err := w.Events(cmd.Context(), wo.scope)
			if err != nil {
				return err
			}
			if wo.json {
				return render.JSON(cmd.OutOrStdout(), struct {
					Window capacity.WindowState   `json:"window"`
					Events []capacity.WindowEvent `json:"events"`
				}{st, evs})
			}
			return render.Window(cmd.OutOrStdout(), st, evs)
		},
	}
	window.Flags().BoolVar(&wo.json, "json", false, "print the window and its events as JSON")
	var ro scopeOptions
	resume := &cobra.Command{
		Use:   "resume SCOPE",
		Short: "Let a paused scope (for example, after a quota top-up) admit again, starting with one probe",
		Args:  cobra.ExactArgs(1),
		RunE: a.withPipelineArgs(func(args []string) validator {
			ro.scope = args[0]
			return ro
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			if err := e.Ledger.ScopeResume(cmd.Context(), ro.scope); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "scope %s resumed: the next request is a probe\n", ro.scope)
			return nil
		}),
	}
	cmd.AddCommand(list, window, resume, a.auditCommand())
	return cmd
}

// redriveCommand is an operator command that moves one recording back into
// the pipeline with move (Retry, Revalidate), recording --reason in its
// history, and prints report of the moved recording.
func (a *commands) redriveCommand(use, short, defaultReason string,
	move func(*jobs.Pipeline, context.Context, *river.Client[pgx.Tx], uuid.UUID, string) (ledger.Recording, error),
	report func(ledger.Recording) string,
) *cobra.Command {
	var o redriveOptions
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: a.withPipelineArgs(func(args []string) validator {
			o.recording = args[0]
			return &o
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			r, err := untilJobFinished(cmd, func() (ledger.Recording, error) {
				return move(e.Jobs, cmd.Context(), e.Client, o.id, o.reason)
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), report(r))
			return nil
		}),
	}
	c.Flags().StringVar(&o.reason, "reason", defaultReason, "why, for the history")
	return c
}

// untilJobFinished runs an operator move, trying again for a few seconds
// while the recording's previous job is still being marked finished.
func untilJobFinished(cmd *cobra.Command, move func() (ledger.Recording, error)) (ledger.Recording, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := move()
		if !errors.Is(err, jobs.ErrJobRunning) || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-cmd.Context().Done():
			return r, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
