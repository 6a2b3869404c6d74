package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// skewedClock is the system clock shifted by d: a worker whose clock runs
// fast (d > 0) or slow.
type skewedClock time.Duration

func (s skewedClock) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// Two workers, one whose clock runs 5 s fast and one 5 s slow, share a
// scope the vendor throttles with delay-seconds Retry-After (1 s). Both
// work on the database's clock (their ledgers measure their offset), so
// every deadline either records is the vendor's second after the 429 as
// the database tells time, never 4 s in the past (the slow one's own
// clock) or 6 s ahead (the fast one's); no submission ignores a known
// cooldown; each recording is transcribed once.
func TestSkewedWorkersKeepOneClock(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{RateLimitShare: 0.3, Cooldown: time.Second, RetryAfterForm: sttsim.FormSeconds}, jobs.Config{}, 30)
	ctx := context.Background()
	for _, skew := range []time.Duration{5 * time.Second, -5 * time.Second} {
		l, err := ledger.New(e.pool, &ledger.Config{LocalClock: skewedClock(skew)})
		if err != nil {
			t.Fatal(err)
		}
		ra := e.pipeline.Config().RetryAfter
		ra.Clock = nil // the worker's own: the ledger's (jobs.Config.Clock's default)
		p, err := jobs.New(e.pool, l, jobs.Config{BatchWorkers: 5, Tenants: e.pipeline.Config().Tenants, RetryAfter: ra,
			PollInterval: 50 * time.Millisecond, ProbeWait: 50 * time.Millisecond, RolloutDefault: ledger.RolloutEnforce},
			jobs.Deps{Store: storeOf(t, e.root)})
		if err != nil {
			t.Fatal(err)
		}
		client, err := jobstest.NewClient(e.pool, p, nil, nil)
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
	}
	for i, f := range files {
		if _, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f}); err != nil {
			t.Fatal(err)
		}
	}
	if counts := e.waitSettled(t, 2*time.Minute); counts[ledger.StateValidated] != len(files) {
		t.Fatalf("states %v, want all %d validated", counts, len(files))
	}
	st := e.sim.Stats()
	if st.RateLimited == 0 {
		t.Fatal("the vendor never throttled: the test proves nothing")
	}
	exts, err := e.ledger.ScopeDeferralExtensions(ctx, e.pipeline.Config().Tenants["t1"].Scope)
	if err != nil || len(exts) == 0 {
		t.Fatalf("no offer recorded (%v)", err)
	}
	for _, x := range exts {
		if x.Source != "retry-after" {
			continue
		}
		// Retry-After: 1 from a vendor answering at once: the deadline is
		// about 1 s after the offer was written, on the database's clock.
		// Wide margins, far from the 5 s skew either way.
		if ahead := x.OfferedNotBefore.Sub(x.RecordedAt); ahead < 500*time.Millisecond || ahead > 3*time.Second {
			t.Errorf("offer %d (job %d) asks for %s after it was written, want about 1s: the worker's skewed clock leaked in", x.Seq, x.JobID, ahead)
		}
	}
	checkCooldowns(t, e.ledger)
	for key, k := range st.Transcriptions {
		if k != 1 {
			t.Errorf("%s transcribed %d times, want 1", key, k)
		}
	}
}

// storeOf opens the recordings under root, closed when the test ends.
func storeOf(t *testing.T, root string) *audio.Store {
	t.Helper()
	s, err := audio.Open(context.Background(), audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
