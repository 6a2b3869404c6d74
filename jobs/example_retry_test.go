package jobs_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
)

// Retry is the operator's re-drive of a reviewable recording (expired, or
// failed as here): back to eligible with a fresh deadline, recorded as its
// own event, with a job to drive it. Recordings in any other state are
// refused.
func ExamplePipeline_Retry() {
	ctx := context.Background()
	e, cleanup, err := newExample()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "acme", CallID: "call-1001", Audio: "acme/call-1001.wav"})
	if err != nil {
		fmt.Println(err)
		return
	}
	id := res.Recording.ID

	// Ingest left it eligible; a worker would fail it on a permanent
	// vendor error; here by hand.
	if _, err := e.ledger.Transition(ctx, ledger.Transition{RecordingID: id, From: ledger.StateEligible, To: ledger.StateFailed,
		Reason: "vendor: unauthorized", ResponseClass: "unauthorized"}); err != nil {
		fmt.Println(err)
		return
	}

	rec, err := e.pipeline.Retry(ctx, e.client, id, "API key rotated")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("after retry: %s, due in %s (the batch lane's deadline)\n", rec.State, time.Until(rec.Deadline).Round(time.Hour))
	evs, err := e.ledger.Events(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ev := range evs {
		line := fmt.Sprintf("%s -> %s: %s", cmp.Or(ev.Prior, "new"), ev.New, ev.Reason)
		if ev.ResponseClass != "" {
			line += " (" + ev.ResponseClass + ")"
		}
		fmt.Println(line)
	}

	_, err = e.pipeline.Retry(ctx, e.client, id, "")
	fmt.Println(strings.Replace(err.Error(), id.String(), "ID", 1))
	// Output:
	// after retry: eligible, due in 24h0m0s (the batch lane's deadline)
	// new -> received: ingested
	// received -> eligible: ready for admission
	// eligible -> failed: vendor: unauthorized (unauthorized)
	// failed -> eligible: API key rotated (operator)
	// recording ID is eligible: only expired or failed recordings can be retried
}
