package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
)

// RetentionPreview prints what `retention run --dry-run` would remove, per
// tenant, under policy, for people or as JSON.
func RetentionPreview(w io.Writer, policy ledger.PurgeOpts, pre []ledger.TenantPreview, asJSON bool) error {
	if asJSON {
		tenants := map[string]string{}
		for id, d := range policy.Tenants {
			tenants[id] = d.String()
		}
		if pre == nil {
			pre = []ledger.TenantPreview{}
		}
		return JSON(w, map[string]any{"dry_run": true, "default_retention": policy.OlderThan.String(),
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", Printable(p.TenantID), p.Cutoff.Format(time.RFC3339),
			p.Recordings, p.Events, p.Transcripts, p.ActionSets, p.OutboxRows, p.OutboxEvents, p.Extensions, p.AudioObjects,
			p.Oldest.Format(time.RFC3339))
	}
	return tw.Flush()
}

// RetentionReport prints what a retention purge removed, for people or as
// JSON.
func RetentionReport(w io.Writer, rep jobs.RetentionReport, asJSON bool) error {
	if asJSON {
		return JSON(w, map[string]any{"dry_run": false, "batches": rep.Batches, "recordings": rep.Recordings,
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
