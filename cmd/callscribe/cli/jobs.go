package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/scrub"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
)

func (a *commands) jobsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Look at recordings and their histories; re-drive reviewable ones"}

	var tenant, call string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show --tenant T --call C",
		Short: "A call's recordings: the current row and the whole event history",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" || call == "" {
				return errors.New("give --tenant and --call")
			}
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			recs, err := e.Ledger.RecordingsByCall(cmd.Context(), tenant, call)
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				return fmt.Errorf("no recording of call %s/%s: %w", tenant, call, ledger.ErrNotFound)
			}
			type shown struct {
				Recording ledger.Recording `json:"recording"`
				Events    []ledger.Event   `json:"events"`
				// Manifests: the batch manifests the recording was an item
				// of, with their keys and the item's key and state.
				Manifests []ledger.ManifestItem `json:"manifests"`
			}
			var all []shown
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
				all = append(all, shown{r, evs, items})
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(all)
			}
			for _, s := range all {
				r := s.Recording
				fmt.Fprintf(out, "recording %s  %s\n  state %s  attempt %d  lane %s  deadline %s\n  provider %s %s\n",
					r.ID, printable(r.BusinessKey), r.State, r.Attempt, r.Lane, fmtTime(r.Deadline), printable(r.Provider), printable(r.ProviderID))
				fmt.Fprint(out, manifestLines(s.Manifests))
				tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "  SEQ\tAT\tFROM\tTO\tATTEMPT\tCLASS\tRETRY-AFTER\tREASON")
				for _, ev := range s.Events {
					ra := ""
					if ev.RetryAfter != nil {
						ra = fmt.Sprintf("%q", *ev.RetryAfter)
					}
					fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", ev.Seq, ev.At.Format("15:04:05.000"), orDash(string(ev.Prior)),
						ev.New, ev.Attempt, orDash(printable(ev.ResponseClass)), orDash(ra), printable(ev.Reason))
				}
				_ = tw.Flush()
			}
			return nil
		},
	}
	show.Flags().StringVar(&tenant, "tenant", "", "tenant id")
	show.Flags().StringVar(&call, "call", "", "call id")
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var state, ltenant string
	var ljson bool
	var limit int
	list := &cobra.Command{
		Use:   "list [--state S] [--tenant T]",
		Short: "List recordings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !ledger.State(state).Valid() {
				return fmt.Errorf("--state %q is not a state (one of %v)", state, ledger.States())
			}
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			recs, err := e.Ledger.Recordings(cmd.Context(), ledger.RecordingFilter{State: ledger.State(state), TenantID: ltenant, Limit: limit})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if ljson {
				return json.NewEncoder(out).Encode(recs)
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tCALL\tSTATE\tATTEMPT\tLANE\tUPDATED")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.TenantID, r.CallID, r.State, r.Attempt, r.Lane, fmtTime(r.UpdatedAt))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&state, "state", "", "only this state")
	list.Flags().StringVar(&ltenant, "tenant", "", "only this tenant")
	list.Flags().BoolVar(&ljson, "json", false, "print JSON")
	list.Flags().IntVar(&limit, "limit", 1000, "at most this many")

	retry := a.redriveCommand("retry RECORDING-ID",
		"Re-drive an expired or failed recording: back to eligible with a fresh deadline, recorded as its own event",
		"operator retry", (*jobs.Pipeline).Retry,
		func(r ledger.Recording) string {
			return fmt.Sprintf("recording %s is %s again, deadline %s", r.ID, r.State, fmtTime(r.Deadline))
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
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
			byScope := map[string]ledger.Deferral{}
			names := []string{}
			for _, d := range ds {
				byScope[d.Scope] = d
				names = append(names, d.Scope)
			}
			for sc := range windows {
				if _, ok := byScope[sc]; !ok {
					byScope[sc] = ledger.Deferral{Scope: sc}
					names = append(names, sc)
				}
			}
			slices.Sort(names)
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCOPE\tSTATUS\tNOT BEFORE\tPROBE\tWINDOW (IN FLIGHT/SIZE→TARGET, WAITING, PHASE)")
			for _, name := range names {
				d := byScope[name]
				status := "open"
				switch {
				case d.Paused:
					status = "paused: " + printable(d.PausedReason)
				case d.Active(now):
					status = fmt.Sprintf("deferred (%s left)", d.NotBefore.Sub(now).Round(time.Second))
				}
				probe := "-"
				if d.NeedsProbe {
					probe = "needed"
					if d.ProbeJobID != 0 {
						probe = fmt.Sprintf("out (job %d)", d.ProbeJobID)
					}
				}
				win := "-"
				if ws, ok := windows[name]; ok {
					win = fmt.Sprintf("%d/%d→%d, %d waiting, %s", ws.InFlight, ws.Size, ws.Target, ws.Waiting, ws.Phase)
					if ws.Ceiling > 0 {
						win += fmt.Sprintf(", %d refused", ws.Ceiling)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Scope, status, fmtTime(d.NotBefore), probe, win)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if w == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "(no Redis URL configured: scope windows not shown)")
			}
			return nil
		},
	}
	var asJSON bool
	window := &cobra.Command{
		Use:   "window SCOPE [--json]",
		Short: "A scope's concurrency window (size, target, in flight, waiting) and its changes with their causes, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, closeW, err := a.ReadWindows()
			if err != nil {
				return err
			}
			defer closeW()
			if w == nil {
				return errors.New(config.EnvRedisURL + " is not set (nor redis_url in --config): scope windows live in Redis")
			}
			st, err := w.State(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			evs, err := w.Events(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Window capacity.WindowState   `json:"window"`
					Events []capacity.WindowEvent `json:"events"`
				}{st, evs})
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "scope %s: window %d (slow start target %d), %d in flight, %d waiting, phase %s, hold ≈ %s\n",
				st.Scope, st.Size, st.Target, st.InFlight, st.Waiting, st.Phase, time.Duration(st.HoldMS)*time.Millisecond)
			if st.Ceiling > 0 {
				fmt.Fprintf(out, "  %d in flight drew an overload at %s; not tried again until the retry passes\n", st.Ceiling, fmtTime(st.CeilingAt))
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tCHANGE\tFROM\tTO\tCAUSE")
			for _, e := range evs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", e.At.Format(time.RFC3339Nano), e.Kind, e.From, e.To, printable(e.Reason))
			}
			return tw.Flush()
		},
	}
	window.Flags().BoolVar(&asJSON, "json", false, "print the window and its events as JSON")
	resume := &cobra.Command{
		Use:   "resume SCOPE",
		Short: "Let a paused scope (for example, after a quota top-up) admit again, starting with one probe",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			if err := e.Ledger.ScopeResume(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "scope %s resumed: the next request is a probe\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, window, resume, a.auditCommand())
	return cmd
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// printable escapes the control characters of stored text (a vendor's
// message in a reason, say) before it reaches the terminal: an ESC is
// shown as \x1b, never sent. Text stored since callscribe strips them at
// the adapters is unchanged; this covers older rows and operator input.
func printable(s string) string { return scrub.Printable(s) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// untilJobFinished runs an operator move, trying again for a few seconds
// while the recording's previous job is still being marked finished.
// redriveCommand is an operator command that moves one recording back into
// the pipeline with move (Retry, Revalidate), recording --reason in its
// history, and prints report of the moved recording.
func (a *commands) redriveCommand(use, short, defaultReason string,
	move func(*jobs.Pipeline, context.Context, *river.Client[pgx.Tx], uuid.UUID, string) (ledger.Recording, error),
	report func(ledger.Recording) string,
) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("recording id %q: %w", args[0], err)
			}
			e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			r, err := untilJobFinished(cmd, func() (ledger.Recording, error) {
				return move(e.Jobs, cmd.Context(), e.Client, id, reason)
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), report(r))
			return nil
		},
	}
	c.Flags().StringVar(&reason, "reason", defaultReason, "why, for the history")
	return c
}

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
