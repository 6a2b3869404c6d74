package outbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

var seq atomic.Int64

type bundle struct {
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	outbox *outbox.Outbox
	client *river.Client[pgx.Tx]
}

func setup(t *testing.T, dests map[string]outbox.Destination) *bundle {
	t.Helper()
	pool := testdb.New(t)
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := mustOutbox(t, outbox.Config{Destinations: dests}, pool, l)
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, ledger: l, outbox: o, client: client}
}

// validated returns a recording walked to validated.
func (b *bundle) validated(t *testing.T, tenant string) ledger.Recording {
	t.Helper()
	ctx := context.Background()
	n := seq.Add(1)
	h := sha256.Sum256(fmt.Appendf(nil, "audio-%d", n))
	res, err := b.ledger.Ingest(ctx, ledger.NewRecording{TenantID: tenant, CallID: fmt.Sprintf("call-%d", n), AudioSHA256: hex.EncodeToString(h[:])})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Recording
	for _, s := range []ledger.State{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated} {
		if r, err = b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: s}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

var someActions = []crm.Action{
	{Kind: crm.KindCallNote, Text: "Call: rate sheet promised"},
	{Kind: crm.KindNextCall, Date: "2026-12-02"},
}

func TestCommitWritesSetOutboxJobAndTransitionTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook"}})
	ctx := context.Background()
	r := b.validated(t, "acme")
	res, err := b.outbox.Commit(ctx, b.client, r, someActions)
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicate || res.Set.ActionVersion != 1 || len(res.OutboxIDs) != 1 {
		t.Fatalf("commit = %+v", res)
	}
	got, _ := b.ledger.Recording(ctx, r.ID)
	if got.State != ledger.StateCommitted {
		t.Fatalf("recording is %s, want committed", got.State)
	}
	row, err := b.outbox.RowByID(ctx, res.OutboxIDs[0])
	if err != nil || row.State != outbox.StatePending || row.IdempotencyKey != fmt.Sprintf("acme:%s:1", r.CallID) || row.Scope != "crm:acme:webhook" {
		t.Fatalf("outbox row = %+v, %v", row, err)
	}
	var jobs int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'crm_deliver'").Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("%d delivery jobs (%v), want 1", jobs, err)
	}
	set, err := b.outbox.ActionSetByVersion(ctx, "acme", r.CallID, 1)
	if err != nil || len(set.Actions) != 2 || set.Actions[1].Date != "2026-12-02" {
		t.Fatalf("stored set = %+v, %v", set, err)
	}

	// A tenant without a CRM: committed, nothing to deliver.
	r2 := b.validated(t, "no-crm")
	res2, err := b.outbox.Commit(ctx, b.client, r2, someActions)
	if err != nil || len(res2.OutboxIDs) != 0 {
		t.Fatalf("commit without a destination = %+v, %v", res2, err)
	}
}

// Workers racing the same commit: one set, one outbox row, one job; the
// rest meet the conflict, count it and converge on the committed set.
func TestCommitRaceConverges(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook"}})
	ctx := context.Background()
	r := b.validated(t, "acme")
	const workers = 8
	results := make([]outbox.CommitResult, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = b.outbox.Commit(ctx, b.client, r, someActions)
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v", i, errs[i])
		}
		if !results[i].Duplicate {
			winners++
		}
		if results[i].Set.ActionVersion != 1 {
			t.Fatalf("worker %d converged on version %d", i, results[i].Set.ActionVersion)
		}
	}
	if winners != 1 {
		t.Fatalf("%d workers committed, want 1", winners)
	}
	n, err := b.outbox.Counter(ctx, outbox.CounterDuplicateKeyConflicts)
	if err != nil || n != workers-1 {
		t.Fatalf("duplicate_key_conflicts = %d (%v), want %d", n, err, workers-1)
	}
	var sets, rows int
	_ = b.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM action_sets), (SELECT count(*) FROM outbox)").Scan(&sets, &rows)
	if sets != 1 || rows != 1 {
		t.Fatalf("%d sets, %d outbox rows; want 1, 1", sets, rows)
	}
}

// Re-validating a committed recording produces version 2; version 1 stays.
func TestRevalidateMakesVersionTwo(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	r := b.validated(t, "acme")
	if _, err := b.outbox.Commit(ctx, b.client, r, someActions); err != nil {
		t.Fatal(err)
	}
	r, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: ledger.StateCommitted, To: ledger.StateValidated, Reason: "operator revalidate"})
	if err != nil {
		t.Fatal(err)
	}
	v2 := []crm.Action{{Kind: crm.KindCallNote, Text: "corrected"}}
	res, err := b.outbox.Commit(ctx, b.client, r, v2)
	if err != nil || res.Set.ActionVersion != 2 {
		t.Fatalf("second commit = %+v, %v", res, err)
	}
	v1, err := b.outbox.ActionSetByVersion(ctx, "acme", r.CallID, 1)
	if err != nil || len(v1.Actions) != 2 {
		t.Fatalf("version 1 changed: %+v, %v", v1, err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE action_sets SET actions = '[]'"); err == nil {
		t.Fatal("action sets can be rewritten")
	}
}

// mustOutbox is outbox.New, failing t on an error.
func mustOutbox(t testing.TB, cfg outbox.Config, pool *pgxpool.Pool, l *ledger.Ledger) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(cfg, pool, l)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
