package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

type crmEnv struct {
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	p      *jobs.Pipeline
	outbox *outbox.Outbox
	client *river.Client[pgx.Tx]
	stt    *sttsim.Server
	crm    *crmsim.Server
	scope  string
	crmURL string
	n      int
	root   string // the audio root
	// changes fires after each write to recordings or scope_deferrals.
	changes <-chan struct{}
}

// envOpts change runToDeliveredWith's outbox and what it does before the
// workers start.
type envOpts struct {
	outbox func(*outbox.Config)
	before func(ctx context.Context, l *ledger.Ledger, scope string)
}

type envOption func(*envOpts)

// runToDelivered ingests n recordings of tenant t1 (a webhook CRM behind
// crmsim with crmCfg) and runs the workers until every action set is
// delivered.
func runToDelivered(t *testing.T, n int, crmCfg crmsim.Config) *crmEnv {
	t.Helper()
	return runToDeliveredWith(t, n, sttsim.Config{}, jobs.Config{}, crmCfg)
}

// runToDeliveredWith is runToDelivered with the speech vendor's trouble
// (its transcriber is runToDelivered's) and the pipeline's configuration
// (its tenants and poll interval are runToDelivered's).
func runToDeliveredWith(t *testing.T, n int, sttCfg sttsim.Config, cfg jobs.Config, crmCfg crmsim.Config, opts ...envOption) *crmEnv {
	t.Helper()
	var o envOpts
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, jobstest.LedgerTables...)
	root := t.TempDir()
	var files []string
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("t1/call-%03d.wav", i))
		jobstest.WriteWAV(t, p, 2*time.Second, i+11)
		files = append(files, p)
	}
	sttCfg.Transcribe = func(r sttsim.SubmitRequest) (sttsim.Result, error) {
		return sttsim.Result{Text: "Thanks. I'll send you the rate sheet for Chicago to Dallas by Friday. Let's talk again next Wednesday.",
			Language: "en", Confidence: 0.95, Duration: 2 * time.Second}, nil
	}
	sim, err := sttsim.New(sttCfg)
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	t.Cleanup(stt.Close)
	crmSim, err := crmsim.New(crmCfg)
	if err != nil {
		t.Fatal(err)
	}
	crmSrv := httptest.NewServer(crmSim.Handler())
	t.Cleanup(crmSrv.Close)

	l, _ := ledger.New(pool, nil)
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tenant := jobs.TenantConfig{Provider: "generic-http", BaseURL: stt.URL, APIKey: "sim-key", TimeZone: "America/Chicago"}
	tgt, err := connector.New(connector.Config{Kind: "webhook", BaseURL: crmSrv.URL, Token: "crm-token"})
	if err != nil {
		t.Fatal(err)
	}
	scope := "crm:t1:webhook" // the default scope of t1's CRM
	obCfg := outbox.Config{Destinations: map[string]outbox.Destination{"t1": {Name: "webhook", Scope: scope, Target: tgt}},
		ProbeWait: 50 * time.Millisecond, Logger: cfg.Logger}
	if o.outbox != nil {
		o.outbox(&obCfg)
	}
	ob, err := outbox.New(obCfg, pool, l)
	if err != nil {
		t.Fatal(err)
	}
	if o.before != nil {
		o.before(ctx, l, scope)
	}
	cfg.Tenants, cfg.PollInterval = map[string]jobs.TenantConfig{"t1": tenant}, 50*time.Millisecond
	deps := jobs.Deps{Store: store}
	commitThrough(&deps, ob)
	p, err := jobs.New(pool, l, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobstest.NewClient(pool, p, ob, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if _, err := p.Ingest(ctx, client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f,
			StartedAt: time.Date(2026, 11, 23, 9, 0, 0, 0, time.FixedZone("CST", -6*3600))}); err != nil {
			t.Fatal(err)
		}
	}
	// A delivery job completes (or snoozes, throttled) after each try.
	finished, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed,
		river.EventKindJobFailed, river.EventKindJobCancelled)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.StopAndCancel(context.Background()) })

	var rows []outbox.Row
	delivered := func() bool {
		if rows, err = ob.Rows(ctx, outbox.StateDelivered, 100); err != nil {
			t.Fatal(err)
		}
		return len(rows) == n
	}
	if !testwait.Until(60*time.Second, finished, delivered) {
		counts, _ := l.CountByState(ctx)
		all, _ := ob.Rows(ctx, "", 100)
		t.Fatalf("after 60s: %d delivered; recordings %v; outbox %+v", len(rows), counts, all)
	}
	return &crmEnv{pool: pool, ledger: l, p: p, outbox: ob, client: client, stt: sim, crm: crmSim, scope: scope, crmURL: crmSrv.URL, n: n, root: root, changes: changes}
}

// From ingest to the CRM: every recording ends committed, its action set is
// delivered once with its idempotency key, while the CRM throttles.
func TestPipelineCommitsAndDelivers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A fixed seed and a high share: the CRM surely throttles.
	e := runToDelivered(t, 10, crmsim.Config{RateLimitShare: 0.5, Cooldown: 300 * time.Millisecond, ServerErrorShare: 0.1,
		Rand: rand.New(rand.NewPCG(3, 5))})
	l, crmSim, scope, p := e.ledger, e.crm, e.scope, e.p
	files := make([]struct{}, e.n)
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
	// A transcript received, validated and committed is one statement: its
	// three events carry that statement's one time, after the submission.
	recs, err := l.Recordings(ctx, ledger.RecordingFilter{State: ledger.StateCommitted})
	if err != nil || len(recs) != e.n {
		t.Fatalf("committed recordings: %d, %v", len(recs), err)
	}
	for _, r := range recs {
		evs, err := l.Events(ctx, r.ID)
		if err != nil || len(evs) < 5 {
			t.Fatalf("events of %s: %+v, %v", r.CallID, evs, err)
		}
		last := evs[len(evs)-3:]
		if last[0].Prior != ledger.StateSubmitted || last[0].New != ledger.StateTranscribed || last[1].New != ledger.StateValidated ||
			last[2].New != ledger.StateCommitted || !last[0].At.Equal(last[1].At) || !last[1].At.Equal(last[2].At) ||
			!evs[len(evs)-4].At.Before(last[0].At) {
			t.Fatalf("%s's last events %+v: want submitted -> transcribed -> validated -> committed written at one instant", r.CallID, evs)
		}
	}
	// The speech vendor's scope was never touched by the CRM's throttling.
	if d, _ := l.ScopeDeferral(ctx, p.Config().Tenants["t1"].Scope); !d.NotBefore.IsZero() {
		t.Fatalf("CRM throttling deferred the speech scope: %+v", d)
	}
}
