package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/callscribe/callscribe/outbox"
)

// A pending row left without a delivery job (a prompt try cut short by a
// kill, a job lost) is given one once untouched for OrphanAfter, exactly
// once: a row with an active job, or touched more recently, is left
// alone.
func TestAdoptOrphansGivesEachRowWithoutAJobOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dests := map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook"}}
	b := setup(t, dests) // OrphanAfter: its default, a minute
	quick := mustOutbox(t, outbox.Config{Destinations: dests, OrphanAfter: time.Millisecond}, b.pool, b.ledger)
	var ids []int64
	for range 3 {
		res, err := b.outbox.Commit(ctx, b.client, b.validated(t, "acme"), someActions)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.OutboxIDs[0])
	}
	jobsOf := func(id int64) int {
		t.Helper()
		var n int
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'crm_deliver' AND args->>'outbox_id' = $1",
			strconv.FormatInt(id, 10)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Rows 0 and 1 lose their jobs; row 2 keeps its own.
	if _, err := b.pool.Exec(ctx, "DELETE FROM river_job WHERE kind = 'crm_deliver' AND args->>'outbox_id' = ANY($1)",
		[]string{strconv.FormatInt(ids[0], 10), strconv.FormatInt(ids[1], 10)}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.outbox.AdoptOrphans(ctx, b.client); err != nil || n != 0 {
		t.Fatalf("adopted %d rows touched a moment ago (%v), want 0 before OrphanAfter", n, err)
	}
	time.Sleep(5 * time.Millisecond)
	n, err := quick.AdoptOrphans(ctx, b.client)
	if err != nil || n != 2 {
		t.Fatalf("adopted %d rows (%v), want the 2 without a job", n, err)
	}
	for i, id := range ids {
		if got := jobsOf(id); got != 1 {
			t.Fatalf("row %d has %d delivery jobs, want 1", i, got)
		}
	}
	if n, err := quick.AdoptOrphans(ctx, b.client); err != nil || n != 0 {
		t.Fatalf("adopted %d rows again (%v), want 0: each has its job", n, err)
	}
}
