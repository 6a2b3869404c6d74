package dbsqlc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// validated is a recording of call walked to validated.
func validated(t *testing.T, l *ledger.Ledger, call string) ledger.Recording {
	t.Helper()
	ctx := context.Background()
	h := sha256.Sum256([]byte(call))
	res, err := l.Ingest(ctx, ledger.NewRecording{TenantID: "acme", CallID: call, AudioSHA256: hex.EncodeToString(h[:])})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Recording
	for _, s := range []ledger.State{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated} {
		if r, err = l.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: s}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// The outbox row an action set's commit returns (what a prompt try
// delivers from) is the row OutboxDeliveryGet reads back (what a River
// job's try delivers from), field for field: the actions as the jsonb
// column gives them back, not as they were sent, so that every try sends
// the same bytes. Without a destination there is no row.
func TestActionSetCommitReturnsTheDeliveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := pgtime.Write(time.Now())
	received := now.Add(-time.Minute)
	// Keys out of order and spaced: jsonb stores them otherwise.
	actions := []byte(`[{"text": "Call: rate sheet promised",   "kind": "call_note"}]`)
	commit := func(rec ledger.Recording, target, scope *string) dbsqlc.ActionSetCommitRow {
		t.Helper()
		var row dbsqlc.ActionSetCommitRow
		var rerr error
		b := &pgx.Batch{}
		dbsqlc.QueueActionSetCommit(b, dbsqlc.ActionSetCommitParams{RecordingID: rec.ID, TenantID: rec.TenantID, CallID: rec.CallID,
			RecordingSha256: rec.AudioSHA256, Actions: actions, CommittedAt: now, Target: target, Scope: scope,
			Deadline: now.Add(time.Hour), ReceivedAt: &received}, func(r dbsqlc.ActionSetCommitRow, err error) { row, rerr = r, err })
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
		return row
	}

	target, scope := "webhook", "crm:acme:webhook"
	row := commit(validated(t, l, "call-1"), &target, &scope)
	if row.OutboxID == nil || row.Delivery == nil {
		t.Fatalf("commit with a destination returned %+v, want its outbox row", row)
	}
	read, err := dbsqlc.New().OutboxDeliveryGet(ctx, pool, *row.OutboxID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*row.Delivery, read) {
		t.Fatalf("the commit returned\n%+v\nOutboxDeliveryGet reads\n%+v", *row.Delivery, read)
	}
	if string(read.Actions) == string(actions) {
		t.Fatalf("the jsonb column gave the actions back as sent (%s): the check above proves nothing of their bytes", read.Actions)
	}

	none := commit(validated(t, l, "call-2"), nil, nil)
	if none.OutboxID != nil || none.Delivery != nil {
		t.Fatalf("commit without a destination returned outbox row %v, %+v; want none", none.OutboxID, none.Delivery)
	}
}
