package jobs_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/crm/target"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// From ingest to the CRM: every recording ends committed, its action set is
// delivered once with its idempotency key, while the CRM throttles.
func TestPipelineCommitsAndDelivers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	root := t.TempDir()
	var files []string
	for i := range 10 {
		p := filepath.Join(root, fmt.Sprintf("t1/call-%03d.wav", i))
		writeWAV(t, p, 2*time.Second, i+11)
		files = append(files, p)
	}
	sim, err := sttsim.New(sttsim.Config{Transcribe: func(r sttsim.SubmitRequest) (sttsim.Result, error) {
		return sttsim.Result{Text: "Thanks. I'll send you the rate sheet for Chicago to Dallas by Friday. Let's talk again next Wednesday.",
			Language: "en", Confidence: 0.95, Duration: 2 * time.Second}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	crmSim, err := crmsim.New(crmsim.Config{RateLimitShare: 0.3, Cooldown: 300 * time.Millisecond, ServerErrorShare: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	crmSrv := httptest.NewServer(crmSim.Handler())
	defer crmSrv.Close()

	l, _ := ledger.New(pool, nil)
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	tenant := jobs.TenantConfig{Provider: "generic-http", BaseURL: stt.URL, APIKey: "sim-key", TimeZone: "America/Chicago",
		CRM: jobs.CRMConfig{Kind: "webhook", BaseURL: crmSrv.URL, Token: "crm-token"}}
	p, err := jobs.New(jobs.Config{Tenants: map[string]jobs.TenantConfig{"t1": tenant}, PollInterval: 50 * time.Millisecond}, pool, l, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := target.New(tenant.CRM.Target())
	if err != nil {
		t.Fatal(err)
	}
	scope := p.Config().Tenants["t1"].CRM.Scope
	ob := outbox.New(outbox.Config{Destinations: map[string]outbox.Destination{"t1": {Name: "webhook", Scope: scope, Target: tgt}},
		ProbeWait: 50 * time.Millisecond}, pool, l)
	p.SetOutbox(ob, nil)
	client, err := p.NewClient(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if _, err := p.Ingest(ctx, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f,
			StartedAt: time.Date(2026, 11, 23, 9, 0, 0, 0, time.FixedZone("CST", -6*3600))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.StopAndCancel(context.Background()) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, err := ob.Rows(ctx, outbox.StateDelivered, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == len(files) {
			break
		}
		if time.Now().After(deadline) {
			counts, _ := l.CountByState(ctx)
			all, _ := ob.Rows(ctx, "", 100)
			t.Fatalf("after 60s: %d delivered; recordings %v; outbox %+v", len(rows), counts, all)
		}
		time.Sleep(50 * time.Millisecond) //nolint:forbidigo // polling the database with a deadline
	}
	counts, _ := l.CountByState(ctx)
	if counts[ledger.StateCommitted] != len(files) {
		t.Fatalf("recordings %v, want all committed", counts)
	}
	st := crmSim.Stats()
	if st.Applied != len(files) {
		t.Fatalf("the CRM holds %d action sets, want %d", st.Applied, len(files))
	}
	for key, n := range st.ApplyCount {
		if n != 1 {
			t.Fatalf("%s applied %d times", key, n)
		}
	}
	if st.RateLimited == 0 {
		t.Fatal("the CRM never throttled: the test proves less than it claims")
	}
	exts, err := l.ScopeDeferralExtensions(ctx, scope)
	if err != nil || len(exts) == 0 {
		t.Fatalf("CRM throttling did not defer the CRM scope %s (%v)", scope, err)
	}
	sets := crmSim.ActionSets()
	for _, s := range sets {
		kinds := map[string]bool{}
		for _, a := range s.Actions {
			kinds[string(a.Kind)] = true
		}
		if !kinds["call_note"] || !kinds["rate_sheet_promised"] || !kinds["next_call"] || s.ActionVersion != 1 {
			t.Fatalf("delivered set %+v lacks an expected action", s)
		}
	}
	// The speech vendor's scope was never touched by the CRM's throttling.
	if d, _ := l.ScopeDeferral(ctx, p.Config().Tenants["t1"].Scope); !d.NotBefore.IsZero() {
		t.Fatalf("CRM throttling deferred the speech scope: %+v", d)
	}
}
