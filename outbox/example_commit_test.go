package outbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// Commit writes a validated recording's action set, its outbox row and the
// River job that delivers it, and moves the recording to committed, in one
// transaction. A second worker committing the same recording converges on
// the first one's set. The example needs the PostgreSQL at
// TEST_DATABASE_URL, like the rest of the suite.
func ExampleOutbox_Commit() {
	ctx := context.Background()
	pool, drop := testdb.ForExample()
	defer drop()
	l, err := ledger.New(pool, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The dispatcher's Target is left out: this example delivers nothing.
	ob, err := outbox.New(outbox.Config{Destinations: map[string]outbox.Destination{
		"acme": {Name: "webhook", Scope: "crm:acme:webhook"},
	}}, pool, l)
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert-only
	if err != nil {
		fmt.Println(err)
		return
	}

	// A recording the pipeline transcribed and validated.
	digest := sha256.Sum256([]byte("call-1001 audio"))
	in, err := l.Ingest(ctx, ledger.NewRecording{TenantID: "acme", CallID: "call-1001", AudioSHA256: hex.EncodeToString(digest[:])})
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := in.Recording
	for _, to := range []ledger.State{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated} {
		if rec, err = l.Transition(ctx, ledger.Transition{RecordingID: rec.ID, From: rec.State, To: to}); err != nil {
			fmt.Println(err)
			return
		}
	}

	actions := []crm.Action{
		{Kind: crm.KindCallNote, Text: "Rate sheet for Chicago to Dallas promised by Friday"},
		{Kind: crm.KindNextCall, Date: "2026-12-02"},
	}
	res, err := ob.Commit(ctx, client, rec, actions)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("action set v%d of %s/%s: %d actions, duplicate=%v\n",
		res.Set.ActionVersion, res.Set.TenantID, res.Set.CallID, len(res.Set.Actions), res.Duplicate)
	row, err := ob.RowByID(ctx, res.OutboxIDs[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("outbox row: %s to %s, idempotency key %s\n", row.State, row.Target, row.IdempotencyKey)

	// Another worker that validated the same recording commits too.
	again, err := ob.Commit(ctx, client, rec, actions)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("second commit: v%d, duplicate=%v, %d outbox rows\n", again.Set.ActionVersion, again.Duplicate, len(again.OutboxIDs))
	if rec, err = l.Recording(ctx, rec.ID); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("recording:", rec.State)
	// Output:
	// action set v1 of acme/call-1001: 2 actions, duplicate=false
	// outbox row: pending to webhook, idempotency key acme:call-1001:1
	// second commit: v1, duplicate=true, 0 outbox rows
	// recording: committed
}
