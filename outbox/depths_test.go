package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// Depths counts the pending and dead rows (not the delivered ones) and the
// age of the oldest pending one at the time given: 0 when none is
// pending, or when that time precedes its commit.
func TestDepths(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if d, err := b.outbox.Depths(ctx, now); err != nil || d != (outbox.Depths{}) {
		t.Fatalf("depths of an empty outbox: %+v, %v", d, err)
	}
	res, err := b.ledger.Ingest(ctx, ledger.NewRecording{TenantID: "t1", CallID: "call-a", AudioSHA256: strings.Repeat("a", 64),
		Lane: ledger.LaneBatch, AudioURI: "a.wav"})
	if err != nil {
		t.Fatal(err)
	}
	var setID int64
	if err := b.pool.QueryRow(ctx, `INSERT INTO action_sets (recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at)
		VALUES ($1, 't1', 'call-a', 1, $2, '[]', $3) RETURNING id`, res.Recording.ID, strings.Repeat("a", 64), now).Scan(&setID); err != nil {
		t.Fatal(err)
	}
	// Pending for 2 minutes and for 1, dead for 5, delivered for 10.
	for i, r := range []struct {
		state string
		age   time.Duration
	}{{outbox.StatePending, 2 * time.Minute}, {outbox.StatePending, time.Minute}, {outbox.StateDead, 5 * time.Minute}, {outbox.StateDelivered, 10 * time.Minute}} {
		if _, err := b.pool.Exec(ctx, `INSERT INTO outbox (action_set_id, target, scope, idempotency_key, state, created_at, updated_at, deadline)
			VALUES ($1, $2, 'crm:t1', 'k', $3, $4, $4, $5)`, setID, []string{"webhook", "hubspot", "salesforce", "other"}[i], r.state,
			now.Add(-r.age), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.outbox.Depths(ctx, now)
	if want := (outbox.Depths{Pending: 2, Dead: 1, OldestPendingAge: 2 * time.Minute}); err != nil || d != want {
		t.Fatalf("depths %+v, %v; want %+v", d, err, want)
	}
	if d, err := b.outbox.Depths(ctx, now.Add(-time.Hour)); err != nil || d.OldestPendingAge != 0 || d.Pending != 2 {
		t.Fatalf("depths an hour before: %+v, %v; want the oldest pending at 0", d, err)
	}
}
