package render

import (
	"fmt"
	"io"
	"time"

	"github.com/callscribe/callscribe/jobs"
)

// Ingest prints what ingesting one recording did.
func Ingest(w io.Writer, res jobs.IngestResult) {
	r := res.Recording
	switch {
	case !res.Created:
		fmt.Fprintf(w, "already known: %s %s/%s is %s\n", r.ID, r.TenantID, r.CallID, r.State)
	case res.CallIDReused:
		fmt.Fprintf(w, "ingested %s %s/%s (this call id was seen before with other audio: kept as a new recording)\n", r.ID, r.TenantID, r.CallID)
	case res.Route != nil:
		fmt.Fprintf(w, "ingested %s %s/%s on %s (%s), deadline %s\n", r.ID, r.TenantID, r.CallID, r.Lane, res.Route.Reason, r.Deadline.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "ingested %s %s/%s on %s, deadline %s\n", r.ID, r.TenantID, r.CallID, r.Lane, r.Deadline.Format(time.RFC3339))
	}
}
