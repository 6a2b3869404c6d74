package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// A CRM that refuses a set permanently: the row goes dead with its event;
// `outbox retry` makes it pending again with an operator event, and it is
// delivered once the CRM accepts it. Salesforce-style usage figures are kept
// as gauges.
func TestDeadDeliveryRetriedByOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var refuse atomic.Bool
	refuse.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if refuse.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request","message":"unknown account"}}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "crm_1", "applied_at": "2026-11-29T17:04:06Z"})
	}))
	defer srv.Close()
	tgt, err := connector.New(connector.Config{Kind: "webhook", BaseURL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	pool := testdb.New(t)
	l, _ := ledger.New(pool, nil)
	o := mustOutbox(t, outbox.Config{Destinations: map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook", Target: tgt}}}, pool, l)
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers,
		Queues: map[string]river.QueueConfig{outbox.Queue: {MaxWorkers: 2}}, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, ledger: l, outbox: o, client: client}
	r := b.validated(t, "acme")
	res, err := o.Commit(ctx, client, r, someActions)
	if err != nil {
		t.Fatal(err)
	}
	// The delivery job ends each try: completed, snoozed, failed or
	// cancelled.
	finished, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed,
		river.EventKindJobFailed, river.EventKindJobCancelled)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.StopAndCancel(context.Background()) }()
	id := res.OutboxIDs[0]
	wait := func(state string) outbox.Row {
		t.Helper()
		var row outbox.Row
		if !testwait.Until(20*time.Second, finished, func() bool {
			if row, err = o.RowByID(ctx, id); err != nil {
				t.Fatal(err)
			}
			return row.State == state
		}) {
			t.Fatalf("row is %s, want %s", row.State, state)
		}
		return row
	}
	dead := wait(outbox.StateDead)
	if dead.LastClass != "invalid_request" || dead.Attempts != 1 {
		t.Fatalf("dead row = %+v", dead)
	}
	refuse.Store(false)
	// The job that found the row dead may not be marked completed yet.
	retried := func() bool {
		err = o.Retry(ctx, client, id)
		if err != nil && !errors.Is(err, outbox.ErrJobRunning) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !testwait.Until(10*time.Second, finished, retried) {
		t.Fatal(err)
	}
	row := wait(outbox.StateDelivered)
	if row.CRMID != "crm_1" || row.Attempts != 2 {
		t.Fatalf("delivered row = %+v", row)
	}
	evs, err := o.Events(ctx, id)
	if err != nil || len(evs) != 3 {
		t.Fatalf("events = %+v, %v; want dead, operator retry, delivered", evs, err)
	}
	if evs[0].New != outbox.StateDead || evs[1].Outcome != "retry" || evs[1].New != outbox.StatePending || evs[2].New != outbox.StateDelivered || evs[2].CRMID != "crm_1" {
		t.Fatalf("history = %+v", evs)
	}
	if err := o.Retry(ctx, client, id); err == nil {
		t.Fatal("a delivered row was retried")
	}
}

// An action set the connector refuses before sending (invalid for its
// CRM) goes dead at once with the reason, instead of being retried forever;
// the CRM never sees it.
func TestInvalidDeliveryGoesDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	tgt, err := connector.New(connector.Config{Kind: "webhook", BaseURL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	pool := testdb.New(t)
	l, _ := ledger.New(pool, nil)
	o := mustOutbox(t, outbox.Config{Destinations: map[string]outbox.Destination{"acme": {Name: "webhook", Scope: "crm:acme:webhook", Target: tgt}}}, pool, l)
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers,
		Queues: map[string]river.QueueConfig{outbox.Queue: {MaxWorkers: 2}}, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, ledger: l, outbox: o, client: client}
	r := b.validated(t, "acme")
	res, err := o.Commit(ctx, client, r, []crm.Action{{Kind: crm.KindCallNote, Text: "note"}, {Kind: crm.KindNextCall, Date: "someday"}})
	if err != nil {
		t.Fatal(err)
	}
	finished, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed, river.EventKindJobFailed)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.StopAndCancel(context.Background()) }()
	var row outbox.Row
	if !testwait.Until(20*time.Second, finished, func() bool {
		row, err = o.RowByID(ctx, res.OutboxIDs[0])
		return err == nil && row.State == outbox.StateDead
	}) {
		t.Fatalf("row is %+v (%v), want dead", row, err)
	}
	evs, err := o.Events(ctx, row.ID)
	if err != nil || len(evs) != 1 || evs[0].ResponseClass != "invalid_delivery" || !strings.Contains(evs[0].Reason, "next_call") {
		t.Fatalf("events = %+v, %v; want one invalid_delivery naming the action", evs, err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the CRM got %d requests, want none", n)
	}
}
