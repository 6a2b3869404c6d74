package render

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/callscribe/callscribe/capacity"
)

// Capacity prints the table of `capacity status`: slots in use, the
// configured and effective limits, and the latest per-minute peak.
func Capacity(w io.Writer, st []capacity.ProviderStatus) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tKIND\tIN USE\tLIMIT\tEFFECTIVE\tPEAK (LAST MINUTE SEEN)")
	for _, s := range st {
		eff := strconv.Itoa(s.EffectiveLimit)
		if s.Learned {
			eff += " (learned)"
		}
		peak := "-"
		if n := len(s.PeakPerMinute); n > 0 {
			p := s.PeakPerMinute[n-1]
			peak = fmt.Sprintf("%d at %s", p.Peak, p.Minute.Format("15:04"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.Provider, s.Kind, s.InUse, s.ConfiguredLimit, eff, peak)
	}
	return tw.Flush()
}

// CallerIDs prints the table of `caller-ids list`.
func CallerIDs(w io.Writer, l []capacity.CallerIDState) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NUMBER\tSTATE\tBUSY SINCE\tCALL")
	for _, s := range l {
		since, call := "-", "-"
		if !s.BusySince.IsZero() {
			since, call = s.BusySince.UTC().Format("2006-01-02 15:04:05Z"), s.CallID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Number, s.State, since, call)
	}
	return tw.Flush()
}
