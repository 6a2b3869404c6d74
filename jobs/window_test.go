package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/sleepers"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// herdVendor is the vendor of the issue: 3 requests in flight per scope,
// 429 above that, plus 15% random 429s, every Retry-After form.
func herdVendor(seed uint64, expected map[string]string) sttsim.Config {
	return herdVendorForm(seed, expected, sttsim.FormMixed)
}

// herdVendorForm is herdVendor with every Retry-After in form.
func herdVendorForm(seed uint64, expected map[string]string, form sttsim.RetryAfterForm) sttsim.Config {
	return sttsim.Config{MaxInFlight: 3, RateLimitShare: 0.15, RetryAfterForm: form, Cooldown: time.Second,
		Latency: 40 * time.Millisecond, LatencyJitter: 40 * time.Millisecond, ExpectedText: expected,
		Rand: rand.New(rand.NewPCG(seed, seed+1)), TroubleSeed: seed, DecideOnReceipt: true}
}

// herdFigures are what a run cost at the vendor.
type herdFigures struct {
	submissions, transcribed int
	perTranscript            float64
	overLimitPerCooldown     float64
	overLimit, cooldowns     int
	overLimitAll, throttled  int
	violations               int
	elapsed, reopenLag       time.Duration
	closed                   time.Duration             // closedByAnnouncements, when measured
	acc                      ledger.CooldownAccounting // the exact rule, when measured
}

func figuresOf(st sttsim.Stats, elapsed time.Duration) herdFigures {
	per, total := st.OverLimitAfterCooldowns(time.Second)
	lag, _ := st.ReopenLag()
	f := herdFigures{reopenLag: lag, violations: len(st.Violations), submissions: st.Submissions, transcribed: len(st.Transcriptions), overLimitPerCooldown: per,
		overLimit: total, cooldowns: len(st.Cooldowns), elapsed: elapsed, overLimitAll: st.OverLimit, throttled: st.RateLimited}
	if f.transcribed > 0 {
		f.perTranscript = float64(f.submissions) / float64(f.transcribed)
	}
	return f
}

func (f herdFigures) String() string {
	return fmt.Sprintf("%d submissions for %d transcripts (%.2f per transcript), %.2f over-limit 429s in the second after each of %d cooldowns (%d in all; %d over-limit and %d 429s over the run), %d submissions inside an announced cooldown, scope idle %s after a cooldown on average, done in %s",
		f.submissions, f.transcribed, f.perTranscript, f.overLimitPerCooldown, f.cooldowns, f.overLimit, f.overLimitAll, f.throttled, f.violations,
		f.reopenLag.Round(time.Millisecond), f.elapsed.Round(100*time.Millisecond))
}

// The acceptance test: 3 worker processes × 20 workers share one
// scope of a vendor that takes 3 requests in flight (429 above, plus 15%
// random 429s with every Retry-After form); 120 recordings. Through the
// scope's window: at most 1.3 submissions per transcript, at most one
// over-limit 429 in the second after a cooldown ends (on average), none
// admitted inside an announced cooldown. The per-worker sleepers'
// figures on the same vendor and seed are logged beside them.
func TestWindowNoHerdAfterCooldown(t *testing.T) {
	t.Parallel()
	const n, seed = 120, 9
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, jobstest.LedgerTables...)
	root := t.TempDir()
	expected := map[string]string{}
	var files []string
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("t1/call-%03d.wav", i))
		jobstest.WriteWAV(t, p, 2*time.Second+time.Duration(i%5)*100*time.Millisecond, i+3)
		expected[jobstest.FileDigest(t, p)] = fmt.Sprintf("call number %d: the rate sheet goes out on Friday", i)
		files = append(files, p)
	}
	sim, err := sttsim.New(herdVendor(seed, expected))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "herd")
	for i := range 3 {
		startWorkerProcess(t, pool, root, srv.URL, workerBatchWorkersEnv+"=20", workerPollIntervalEnv+"=50ms",
			workerProbeWaitEnv+"=100ms", workerBaseBackoffEnv+"=100ms", workerMaxBackoffEnv+"=1s",
			workerWindowPrefixEnv+"="+prefix, workerClientIDEnv+fmt.Sprintf("=worker-%d", i))
	}
	ctx := context.Background()
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tenant := jobs.TenantConfig{Provider: "generic-http", BaseURL: srv.URL, APIKey: "sim-key", Model: "general"}
	p, err := jobs.New(pool, l, jobs.Config{Tenants: map[string]jobs.TenantConfig{"t1": tenant}}, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobstest.NewClient(pool, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var items []sleepers.Item
	for i, f := range files {
		rec, err := p.Ingest(ctx, client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, sleepers.Item{Key: rec.Recording.BusinessKey, TenantID: "t1", CallID: rec.Recording.CallID,
			AudioURL: "file://" + f, AudioSHA256: rec.Recording.AudioSHA256, AudioBytes: rec.Recording.AudioBytes})
	}
	e := &env{pool: pool, ledger: l, pipeline: p, client: client, sim: sim, root: root, changes: changes}
	counts := e.waitSettled(t, 3*time.Minute)
	if counts[ledger.StateValidated] != n {
		t.Fatalf("states %v, want all %d validated", counts, n)
	}
	st := sim.Stats()
	got := figuresOf(st, time.Since(start))
	if st.RateLimited == 0 || len(st.Cooldowns) == 0 {
		t.Fatal("the vendor never throttled: the test proves nothing")
	}
	checkCooldowns(t, l)

	// The baseline: 60 independent sleepers on the same vendor and seed.
	bsim, err := sttsim.New(herdVendor(seed, expected))
	if err != nil {
		t.Fatal(err)
	}
	bsrv := httptest.NewServer(bsim.Handler())
	t.Cleanup(bsrv.Close)
	prov, err := stt.New("generic-http", stt.Config{BaseURL: bsrv.URL, APIKey: "sim-key", Model: "general"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sleepers.Run(ctx, sleepers.Config{Provider: prov, Workers: 60, PollInterval: 50 * time.Millisecond,
		RetryAfter: retryafter.Policy{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}, items)
	if err != nil {
		t.Fatal(err)
	}
	base := figuresOf(bsim.Stats(), res.Elapsed)
	if w, err := capacity.NewWindows(capRedis(t, rdb, prefix), capacity.WindowConfig{}); err == nil {
		evs, _ := w.Events(ctx, p.Config().Tenants["t1"].Scope)
		kinds := map[string]int{}
		for _, ev := range evs {
			kinds[ev.Kind]++
		}
		st, _ := w.State(ctx, p.Config().Tenants["t1"].Scope)
		t.Logf("window at the end: %+v; changes: %v", st, kinds)
	}
	if testing.Verbose() {
		logTimeline(t, st, start)
	}
	t.Logf("callscribe (window): %s", got)
	t.Logf("per-worker sleepers: %s", base)

	// Wide margins against the baseline measured in the same run (the
	// precise figures are make bench's): at most half the sleepers'
	// requests per transcript and half their over-limit 429s after a
	// cooldown.
	if got.perTranscript > base.perTranscript/2 {
		t.Errorf("%.2f submissions per transcript, want at most half the sleepers' %.2f", got.perTranscript, base.perTranscript)
	}
	if got.overLimitPerCooldown > base.overLimitPerCooldown/2 {
		t.Errorf("%.2f over-limit 429s in the second after a cooldown, want at most half the sleepers' %.2f",
			got.overLimitPerCooldown, base.overLimitPerCooldown)
	}
	for key, k := range st.Transcriptions {
		if k != 1 {
			t.Errorf("%s transcribed %d times, want 1", key, k)
		}
	}
}

// logTimeline logs (with -v), per cooldown, its Retry-After, the
// submissions that arrived during it and how long after its end the next
// one arrived.
func logTimeline(t *testing.T, st sttsim.Stats, start time.Time) {
	for i, cd := range st.Cooldowns {
		var firstOK, firstAny time.Time
		n := 0
		for _, a := range st.Arrivals {
			if a.ArrivedAt.Before(cd.Deadline) {
				continue
			}
			if i+1 < len(st.Cooldowns) && !a.ArrivedAt.Before(st.Cooldowns[i+1].StartedAt) {
				break
			}
			n++
			if firstAny.IsZero() {
				firstAny = a.ArrivedAt
			}
			if a.Status == 200 && firstOK.IsZero() {
				firstOK = a.ArrivedAt
			}
		}
		inside := []string{}
		for _, a := range st.Arrivals {
			if !a.ArrivedAt.Before(cd.StartedAt) && a.ArrivedAt.Before(cd.Deadline) {
				inside = append(inside, fmt.Sprintf("%s:%d", a.ArrivedAt.Sub(cd.StartedAt).Round(10*time.Millisecond), a.Status))
			}
		}
		t.Logf("cooldown %2d: started %6s, form %-11s header %-30q ends %6s; next arrival +%s, next 200 +%s; %d arrivals until the next; inside %v",
			i, cd.StartedAt.Sub(start).Round(10*time.Millisecond), cd.Form, cd.Header, cd.Deadline.Sub(start).Round(10*time.Millisecond),
			firstAny.Sub(cd.Deadline).Round(10*time.Millisecond), firstOK.Sub(cd.Deadline).Round(10*time.Millisecond), n, inside)
	}
}
