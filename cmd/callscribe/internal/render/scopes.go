package render

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/ledger"
)

// Scopes prints the table of `scopes list`: every scope that was deferred,
// paused or windowed, by name, with its status at now and its window.
func Scopes(w io.Writer, ds []ledger.Deferral, windows map[string]capacity.WindowState, now time.Time) error {
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
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tSTATUS\tNOT BEFORE\tPROBE\tWINDOW (IN FLIGHT/SIZE→TARGET, WAITING, PHASE)")
	for _, name := range names {
		d := byScope[name]
		status := "open"
		switch {
		case d.Paused:
			status = "paused: " + Printable(d.PausedReason)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Scope, status, Time(d.NotBefore), probe, win)
	}
	return tw.Flush()
}

// Window prints a scope's concurrency window and its changes, as `scopes
// window` does.
func Window(w io.Writer, st capacity.WindowState, evs []capacity.WindowEvent) error {
	fmt.Fprintf(w, "scope %s: window %d (slow start target %d), %d in flight, %d waiting, phase %s, hold ≈ %s\n",
		st.Scope, st.Size, st.Target, st.InFlight, st.Waiting, st.Phase, time.Duration(st.HoldMS)*time.Millisecond)
	if st.Ceiling > 0 {
		fmt.Fprintf(w, "  %d in flight drew an overload at %s; not tried again until the retry passes\n", st.Ceiling, Time(st.CeilingAt))
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tCHANGE\tFROM\tTO\tCAUSE")
	for _, e := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", e.At.Format(time.RFC3339Nano), e.Kind, e.From, e.To, Printable(e.Reason))
	}
	return tw.Flush()
}
