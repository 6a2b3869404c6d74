package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// simTenant is the tenant setup configures when given none, pointed at url.
func simTenant(url string) map[string]jobs.TenantConfig {
	return map[string]jobs.TenantConfig{"t1": {Provider: "generic-http", BaseURL: url, APIKey: "sim-key", Account: "sim", Model: "general"}}
}

// throttledFirst returns a simulator Rand whose first draw is below share:
// whichever submission arrives first is refused 429 (the knobs at 0 draw
// nothing), so a test that needs throttling always gets some.
func throttledFirst(share float64) *rand.Rand {
	for seed := uint64(1); ; seed++ {
		if rand.New(rand.NewPCG(seed, seed)).Float64() < share {
			return rand.New(rand.NewPCG(seed, seed))
		}
	}
}

func events(t *testing.T, l *ledger.Ledger, id uuid.UUID) []ledger.Event {
	t.Helper()
	evs, err := l.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func allRecordings(t *testing.T, l *ledger.Ledger) []ledger.Recording {
	t.Helper()
	recs, err := l.Recordings(context.Background(), ledger.RecordingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// An observe-only scope records what throttling would have done and
// enforces none of it: recordings complete, each throttled one backing off
// alone; the scope's shared deadline is never set, while every throttled
// answer left an observe-only offer, and submissions went on being
// admitted after offers that enforcement would have honoured.
func TestObserveOnlyScopeRecordsOffersAndDefersNothing(t *testing.T) {
	t.Parallel()
	// The scope setup's tenant derives (its account is named "sim", so the
	// simulator's URL is no part of it).
	scope := jobs.Config{Tenants: simTenant("")}.WithDefaults().Tenants["t1"].Scope
	// The first 429 says "Retry-After: 1" (FormMixed starts with seconds)
	// for a 1s cooldown: the recording it throttled backs off alone
	// (at most 20ms) and arrives again well inside the offered deadline.
	e, files := setup(t, sttsim.Config{RateLimitShare: 0.15, Cooldown: time.Second, RetryAfterForm: sttsim.FormMixed,
		Rand: throttledFirst(0.15)},
		// Throttled submissions count; without a shared deadline a
		// recording retries through a whole cooldown.
		jobs.Config{ObserveOnlyScopes: []string{scope}, MaxSubmissions: 1000}, 12)
	if got := e.pipeline.Config().Tenants["t1"].Scope; got != scope {
		t.Fatalf("the pipeline derived scope %q, want %q", got, scope)
	}
	e.start(t)
	ctx := context.Background()
	for i, f := range files {
		if _, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f}); err != nil {
			t.Fatal(err)
		}
	}
	counts := e.waitSettled(t, 45*time.Second)
	if counts[ledger.StateValidated] != len(files) {
		t.Fatalf("states %v, want all %d validated", counts, len(files))
	}
	st := e.sim.Stats()
	if st.RateLimited == 0 {
		t.Fatal("the simulator never throttled: the test proves nothing")
	}

	// No shared deadline: no row, nothing moved, no probe, not paused.
	d, err := e.ledger.ScopeDeferral(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if !d.NotBefore.IsZero() || d.NeedsProbe || d.Paused {
		t.Fatalf("observe-only scope has a deferral: %+v", d)
	}
	all, err := e.ledger.ScopeDeferrals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if !d.NotBefore.IsZero() || d.NeedsProbe || d.Paused {
			t.Fatalf("scope_deferrals row %+v: an observe-only scope's row only numbers its offers", d)
		}
	}

	// Every throttled answer left exactly one observe-only offer and one
	// retry_wait event carrying the class.
	exts, err := e.ledger.ScopeDeferralExtensions(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range exts {
		if !x.ObserveOnly || !strings.HasPrefix(x.Reason, "observe-only: ") || !x.ResultingNotBefore.Equal(x.OfferedNotBefore) {
			t.Errorf("offer %d is not an observe-only offer: %+v", x.ID, x)
		}
	}
	waits := 0
	for _, r := range allRecordings(t, e.ledger) {
		for _, ev := range events(t, e.ledger, r.ID) {
			if ev.New != ledger.StateRetryWait {
				continue
			}
			waits++
			if ev.ResponseClass != stt.ClassRateLimited || ev.Reason != "throttled: rate_limited" || ev.Detail["scope"] != scope {
				t.Errorf("%s: retry_wait event %+v, want class %s, reason \"throttled: rate_limited\", scope %s",
					r.CallID, ev, stt.ClassRateLimited, scope)
			}
		}
	}
	if len(exts) != st.RateLimited || waits != st.RateLimited {
		t.Errorf("429s: %d, observe-only offers: %d, retry_wait events: %d; want one of each per 429", st.RateLimited, len(exts), waits)
	}

	// Admission went on: submissions were admitted after the platform had
	// recorded an offer they arrive before (enforcement would have held
	// them).
	acc := checkCooldowns(t, e.ledger)
	if acc.IgnoredKnownCooldown == 0 {
		t.Errorf("no submission was admitted inside an observed deadline (%d in flight): is the scope enforced?", acc.InFlight)
	}
	for _, c := range acc.Ignored {
		if !c.Observe {
			t.Errorf("submission %s/%s not marked observe-only: %+v", c.TenantID, c.CallID, c)
		}
	}
	t.Logf("429s: %d, cooldowns: %d, admitted inside an observed deadline: %d", st.RateLimited, len(st.Cooldowns), acc.IgnoredKnownCooldown)
	e.checkHistories(t)
}

// openAIQuotaServer is an OpenAI-compatible transcription endpoint whose
// account has no credit until topUp: every request is then answered 429
// insufficient_quota; after, 200 verbose_json.
type openAIQuotaServer struct {
	exhausted atomic.Bool
	requests  atomic.Int64
	quota     atomic.Int64 // insufficient_quota answers
}

func (s *openAIQuotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" {
		http.NotFound(w, r)
		return
	}
	n := s.requests.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_%d", n))
	if s.exhausted.Load() {
		s.quota.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.",`+
			`"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
		return
	}
	_, _ = io.WriteString(w, `{"task":"transcribe","language":"english","duration":2.2,"text":"The rate sheet goes out on Friday.",`+
		`"segments":[{"id":0,"seek":0,"start":0.0,"end":2.2,"text":" The rate sheet goes out on Friday.","avg_logprob":-0.1,"no_speech_prob":0.01}]}`)
}

// An exhausted quota pauses the scope: the recording that met it and those
// that come later wait, neither failing nor hammering the vendor, until an
// operator resumes the scope; then a single probe goes first and every
// recording finishes, each submitted once more.
func TestQuotaExhaustedPausesScopeUntilResumed(t *testing.T) {
	t.Parallel()
	vendor := &openAIQuotaServer{}
	vendor.exhausted.Store(true)
	srv := httptest.NewServer(vendor)
	t.Cleanup(srv.Close)
	const recheck = 100 * time.Millisecond
	e, files := setup(t, sttsim.Config{}, jobs.Config{
		Tenants:       map[string]jobs.TenantConfig{"t1": {Provider: "openai", BaseURL: srv.URL, APIKey: "sk-test", Model: "whisper-1"}},
		PausedRecheck: recheck,
	}, 5)
	e.start(t)
	ctx := context.Background()
	scope := e.pipeline.Config().Tenants["t1"].Scope
	ingest := func(i int) uuid.UUID {
		res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: files[i]})
		if err != nil {
			t.Fatal(err)
		}
		return res.Recording.ID
	}

	// The first recording meets the exhausted quota and pauses the scope.
	first := ingest(0)
	var deferral ledger.Deferral
	paused := func() bool {
		var err error
		if deferral, err = e.ledger.ScopeDeferral(ctx, scope); err != nil {
			t.Fatal(err)
		}
		return deferral.Paused
	}
	if !testwait.Until(20*time.Second, e.changes, paused) {
		t.Fatalf("scope %s not paused after 20s: %+v (vendor saw %d requests)", scope, deferral, vendor.requests.Load())
	}
	if !strings.Contains(deferral.PausedReason, "quota") {
		t.Errorf("paused for %q, want the vendor's quota message", deferral.PausedReason)
	}
	// Each time a job finds the scope paused, it snoozes for the recheck.
	snoozed, unsubscribe := e.client.Subscribe(river.EventKindJobSnoozed)
	defer unsubscribe()
	ids := []uuid.UUID{first}
	for i := 1; i < len(files); i++ {
		ids = append(ids, ingest(i))
	}

	// For many rechecks of every recording's job, every recording waits:
	// nothing failed, nothing finished, nothing sent. River counts a job's
	// snoozes in its metadata.
	const rechecks = 5
	snoozes := func() map[int64]int {
		rows, err := e.pool.Query(ctx, "SELECT id, coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE kind = 'transcribe'")
		if err != nil {
			t.Fatal(err)
		}
		n := map[int64]int{}
		var id int64
		var k int
		if _, err := pgx.ForEachRow(rows, []any{&id, &k}, func() error { n[id] = k; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before, now := snoozes(), map[int64]int{}
	waiting := func() bool {
		for _, r := range allRecordings(t, e.ledger) {
			switch r.State {
			case ledger.StateReceived, ledger.StateEligible, ledger.StateRetryWait:
			default:
				t.Fatalf("%s is %s while its scope is paused, want it waiting", r.CallID, r.State)
			}
		}
		now = snoozes()
		for id, k := range now {
			if k-before[id] < rechecks {
				return false
			}
		}
		return len(now) == len(files)
	}
	if !testwait.Until(30*time.Second, snoozed, waiting) {
		t.Fatalf("not every recording's job rechecked the paused scope %d times within 30s: snoozes %v, before %v", rechecks, now, before)
	}
	if n := vendor.requests.Load(); n != 1 {
		t.Fatalf("the vendor got %d requests while the scope was paused, want only the first", n)
	}
	rows, err := e.pool.Query(ctx, "SELECT state FROM river_job WHERE kind = 'transcribe' AND state NOT IN ('scheduled', 'available', 'running')")
	if err != nil {
		t.Fatal(err)
	}
	if river, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(river) != 0 {
		t.Fatalf("transcribe jobs in states %v (%v) while paused, want them snoozed, not retried or discarded", river, err)
	}
	quotaEvent := false
	for _, ev := range events(t, e.ledger, first) {
		if ev.New == ledger.StateRetryWait && ev.ResponseClass == stt.ClassQuotaExhausted {
			quotaEvent = true
		}
	}
	if !quotaEvent {
		t.Fatalf("no retry_wait event of class %s in the first recording's history", stt.ClassQuotaExhausted)
	}

	// The operator tops up the account and resumes the scope.
	vendor.exhausted.Store(false)
	if err := e.ledger.ScopeResume(ctx, scope); err != nil {
		t.Fatal(err)
	}
	counts := e.waitSettled(t, 30*time.Second)
	if counts[ledger.StateValidated] != len(files) {
		t.Fatalf("states %v, want all %d validated", counts, len(files))
	}
	if n, q := vendor.requests.Load(), vendor.quota.Load(); n != int64(len(files))+1 || q != 1 {
		t.Errorf("the vendor got %d requests (%d refused for quota), want %d: the first, then one per recording",
			n, q, len(files)+1)
	}
	d, err := e.ledger.ScopeDeferral(ctx, scope)
	if err != nil || d.Paused || d.NeedsProbe {
		t.Errorf("after resume and a successful probe the scope is %+v (%v)", d, err)
	}
	for _, id := range ids {
		rec, err := e.ledger.Recording(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if id == first {
			want = 2
		}
		if rec.Attempt != want {
			t.Errorf("%s: %d submissions, want %d", rec.CallID, rec.Attempt, want)
		}
	}
	e.checkHistories(t)
}

// switchHandler serves whichever handler was set last.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// A recording whose deadline passes while its scope is deferred expires
// (no second submission); an operator's retry gives it a fresh deadline and
// a new job, and it completes against the now well-behaved vendor.
func TestDeadlinePassesWhileDeferredThenOperatorRetry(t *testing.T) {
	t.Parallel()
	throttler, err := sttsim.New(sttsim.Config{RateLimitShare: 1, Cooldown: time.Minute, RetryAfterForm: sttsim.FormSeconds})
	if err != nil {
		t.Fatal(err)
	}
	good, err := sttsim.New(sttsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var vendor switchHandler
	vendor.set(throttler.Handler())
	srv := httptest.NewServer(&vendor)
	t.Cleanup(srv.Close)
	// "Retry-After: 60" is clamped to 3s, so the retried recording does
	// not wait a minute for the scope to reopen.
	e, files := setup(t, sttsim.Config{}, jobs.Config{Tenants: simTenant(srv.URL),
		RetryAfter: retryafter.Policy{BaseBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxDelay: 3 * time.Second}}, 1)
	finished, unsubscribe := e.client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed,
		river.EventKindJobFailed, river.EventKindJobCancelled)
	defer unsubscribe()
	e.start(t)
	ctx := context.Background()
	scope := e.pipeline.Config().Tenants["t1"].Scope
	res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: "call-000", Audio: files[0],
		Lane: ledger.LaneBatch, Deadline: time.Now().Add(time.Second)}) // batch asked for: its retry gets the batch deadline
	if err != nil {
		t.Fatal(err)
	}
	id := res.Recording.ID
	rec := e.waitRecording(t, id, 20*time.Second, "expired", func(r ledger.Recording) bool { return r.State.Terminal() })
	if rec.State != ledger.StateExpired || rec.Attempt != 1 {
		t.Fatalf("recording is %s after %d submissions, want expired after 1", rec.State, rec.Attempt)
	}
	if n := throttler.Stats().Submissions; n != 1 {
		t.Fatalf("the throttling vendor got %d submissions, want 1 (the scope was deferred)", n)
	}
	exts, err := e.ledger.ScopeDeferralExtensions(ctx, scope)
	if err != nil || len(exts) != 1 || exts[0].RetryAfter == nil || *exts[0].RetryAfter != "60" || !exts[0].Clamped {
		t.Fatalf("offers %+v (%v), want one clamped offer from Retry-After: 60", exts, err)
	}
	evs := events(t, e.ledger, id)
	last := evs[len(evs)-1]
	if last.Prior != ledger.StateRetryWait || !strings.HasPrefix(last.Reason, "deadline passed") || last.Detail["state"] != string(ledger.StateRetryWait) {
		t.Fatalf("last event %+v, want retry_wait -> expired, deadline passed", last)
	}
	if !last.At.Before(exts[0].ResultingNotBefore) {
		t.Fatalf("expired at %s, after the scope reopened at %s: the scope was not deferred any more", last.At, exts[0].ResultingNotBefore)
	}

	// The job that expired the recording may not be marked completed
	// yet: Retry then refuses (a re-driven recording with no job to drive
	// it would wait forever) and the operator tries again.
	vendor.set(good.Handler())
	refused := 0
	var retried ledger.Recording
	retry := func() bool {
		retried, err = e.pipeline.Retry(ctx, e.client, id, "operator retry")
		if errors.Is(err, jobs.ErrJobRunning) {
			refused++
			return false
		}
		return true
	}
	testwait.Until(20*time.Second, finished, retry) // after each job River marks finished
	if err != nil {
		t.Fatalf("retry (after %d refusals): %v", refused, err)
	}
	t.Logf("retry refused %d times while the expiring job finished", refused)
	if retried.State != ledger.StateEligible || retried.Deadline.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("after retry: %s, deadline %s; want eligible with a fresh (batch) deadline", retried.State, retried.Deadline)
	}
	rec = e.waitRecording(t, id, 20*time.Second, "validated", func(r ledger.Recording) bool {
		return r.State == ledger.StateValidated || r.State.Terminal()
	})
	if rec.State != ledger.StateValidated || rec.Attempt != 2 {
		t.Fatalf("after retry the recording is %s after %d submissions, want validated after 2", rec.State, rec.Attempt)
	}
	if n := good.Transcriptions(rec.BusinessKey); n != 1 {
		t.Fatalf("the vendor transcribed it %d times, want 1", n)
	}
	// Only reviewable recordings can be retried.
	if _, err := e.pipeline.Retry(ctx, e.client, id, ""); err == nil {
		t.Fatal("retrying a validated recording succeeded, want an error")
	}
	redriven := false
	for _, ev := range events(t, e.ledger, id) {
		if ev.Prior == ledger.StateExpired && ev.New == ledger.StateEligible {
			redriven = ev.ResponseClass == "operator" && ev.Reason == "operator retry"
		}
	}
	if !redriven {
		t.Fatalf("no expired -> eligible event of class operator in %+v", events(t, e.ledger, id))
	}
	e.checkHistories(t)
}

// With no worker running, the sweep expires exactly the unfinished
// recordings whose deadline passed, once.
func TestSweepExpiresOverdueRecordingsWithoutWorkers(t *testing.T) {
	t.Parallel()
	stub := clock.NewStub(time.Now().UTC())
	e, files := setup(t, sttsim.Config{}, jobs.Config{Clock: stub}, 2)
	ctx := context.Background()
	var ids []uuid.UUID
	for i, dl := range []time.Time{stub.Now().Add(time.Hour), {}} { // the second: the batch lane's 24h
		res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: files[i], Deadline: dl})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recording.State != ledger.StateEligible {
			t.Fatalf("ingested %s, want eligible", res.Recording.State)
		}
		ids = append(ids, res.Recording.ID)
	}
	sweep := func(want int) {
		t.Helper()
		n, err := e.pipeline.Sweep(ctx)
		if err != nil || n != want {
			t.Fatalf("sweep expired %d (%v), want %d", n, err, want)
		}
	}
	state := func(id uuid.UUID) ledger.State {
		rec, err := e.ledger.Recording(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.State
	}
	sweep(0)
	stub.Advance(2 * time.Hour)
	sweep(1)
	if state(ids[0]) != ledger.StateExpired || state(ids[1]) != ledger.StateEligible {
		t.Fatalf("after 2h: %s and %s, want expired and eligible", state(ids[0]), state(ids[1]))
	}
	evs := events(t, e.ledger, ids[0])
	last := evs[len(evs)-1]
	if last.Prior != ledger.StateEligible || last.Reason != "deadline passed (sweep)" || last.Detail["state"] != string(ledger.StateEligible) {
		t.Fatalf("last event %+v, want eligible -> expired by the sweep", last)
	}
	sweep(0)
	stub.Advance(23 * time.Hour)
	sweep(1)
	if state(ids[1]) != ledger.StateExpired {
		t.Fatalf("after 25h the second recording is %s, want expired", state(ids[1]))
	}
	e.checkHistories(t)
}

// inFlightSubmissions wraps a handler and closes all when want
// submissions are in flight at once.
type inFlightSubmissions struct {
	next http.Handler
	want int64
	n    atomic.Int64
	all  chan struct{}
	once sync.Once
}

func (f *inFlightSubmissions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/transcriptions" {
		if f.n.Add(1) == f.want {
			f.once.Do(func() { close(f.all) })
		}
		defer f.n.Add(-1)
	}
	f.next.ServeHTTP(w, r)
}

// Stopping a worker: with enough grace, the steps in flight finish (their
// recordings validated, no request abandoned); with too little, they are
// cancelled, the recordings stay submitted with no answer, and a new
// worker reconciles by key and finishes them, each transcribed once.
func TestStopLetsStepsFinishOrResumesThem(t *testing.T) {
	t.Parallel()
	const n = 4
	const latency = 1500 * time.Millisecond
	run := func(t *testing.T, grace time.Duration) (*env, *sttsim.Server, []uuid.UUID, time.Duration) {
		sim, err := sttsim.New(sttsim.Config{Latency: latency})
		if err != nil {
			t.Fatal(err)
		}
		flight := &inFlightSubmissions{next: sim.Handler(), want: n, all: make(chan struct{})}
		srv := httptest.NewServer(flight)
		t.Cleanup(srv.Close)
		e, files := setup(t, sttsim.Config{}, jobs.Config{Tenants: simTenant(srv.URL), ShutdownGrace: grace}, n)
		ctx := context.Background()
		var ids []uuid.UUID
		for i, f := range files { // before the start, so all n are fetched at once
			res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Recording.ID)
		}
		if err := e.client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-flight.all:
		case <-time.After(30 * time.Second):
			t.Fatalf("never %d submissions in flight at once (stats %+v)", n, sim.Stats())
		}
		start := time.Now()
		if err := e.pipeline.Stop(ctx, e.client); err != nil {
			t.Fatalf("stop: %v", err)
		}
		return e, sim, ids, time.Since(start)
	}

	t.Run("grace", func(t *testing.T) {
		t.Parallel()
		e, sim, ids, took := run(t, 30*time.Second)
		for _, id := range ids {
			rec, err := e.ledger.Recording(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != ledger.StateValidated || rec.Attempt != 1 {
				t.Errorf("%s is %s after %d submissions once stopped, want validated after 1", rec.CallID, rec.State, rec.Attempt)
			}
			if k := sim.Transcriptions(rec.BusinessKey); k != 1 {
				t.Errorf("%s transcribed %d times, want 1", rec.CallID, k)
			}
		}
		if c := sim.Stats().Cancelled; c != 0 {
			t.Errorf("%d requests abandoned by a graceful stop", c)
		}
		t.Logf("graceful stop took %s", took)
		e.checkHistories(t)
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		e, sim, ids, took := run(t, 10*time.Millisecond)
		if took >= latency {
			t.Errorf("stop took %s: it waited for the vendor instead of cancelling after the grace", took)
		}
		ctx := context.Background()
		for _, id := range ids {
			rec, err := e.ledger.Recording(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs := events(t, e.ledger, id)
			last := evs[len(evs)-1]
			if rec.State != ledger.StateSubmitted || rec.ProviderID != "" || last.Reason != "admitted" {
				t.Fatalf("%s is %s (provider id %q, last event %q) after a cancelled stop, want submitted with no answer",
					rec.CallID, rec.State, rec.ProviderID, last.Reason)
			}
		}
		// A new worker resumes from the ledger.
		client, err := jobstest.NewClient(e.pool, e.pipeline, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.StopAndCancel(ctx)
		})
		counts := e.waitSettled(t, 30*time.Second)
		if counts[ledger.StateValidated] != n {
			t.Fatalf("states %v after the restart, want all %d validated", counts, n)
		}
		for _, id := range ids {
			rec, err := e.ledger.Recording(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if k := sim.Transcriptions(rec.BusinessKey); k != 1 {
				t.Errorf("%s transcribed %d times, want 1", rec.CallID, k)
			}
			reconciled := false
			for _, ev := range events(t, e.ledger, id) {
				reconciled = reconciled || strings.HasPrefix(ev.Reason, "reconciled: ")
			}
			if !reconciled {
				t.Errorf("%s: no reconcile event: the restarted worker did not ask the vendor by key first", rec.CallID)
			}
		}
		t.Logf("cancelled stop took %s; requests abandoned: %d", took, sim.Stats().Cancelled)
		e.checkHistories(t)
	})
}
