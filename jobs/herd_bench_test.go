package jobs_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/devservice"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/sleepers"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// BenchmarkHerd runs the herd scenario once per iteration: 120 recordings
// through one scope of a vendor that takes 3 requests in flight (429
// above, plus 15% random 429s with every Retry-After form), 60 workers
// with the scope's window; then 60 per-worker sleepers on a fresh
// simulator with the same seed. It reports, for both, vendor requests per
// transcript, over-limit 429s in the second after a cooldown ends (per
// cooldown), and seconds until the last transcript; for callscribe, the
// exact rule's counts (ignored known cooldowns: must be 0; in flight) and
// the admission-to-send gap, idle and once more with a CPU hog on every
// core; ns/op means nothing here.
//
//	make bench  (or: go run ./internal/cmd/testenv -- go test -run '^$' -bench Herd -benchtime 1x ./jobs/)
func BenchmarkHerd(b *testing.B) {
	for _, c := range []struct {
		form sttsim.RetryAfterForm
		hogs int // CPU hogs beside the run: 0 idle, else one per core
	}{{sttsim.FormMixed, 0}, {sttsim.FormSeconds, 0}, {sttsim.FormMixed, runtime.NumCPU()}} {
		name := "retry-after=" + string(c.form)
		if c.hogs > 0 {
			name += "/hogs=" + strconv.Itoa(c.hogs)
		}
		b.Run(name, func(b *testing.B) {
			if c.hogs > 0 {
				h, err := devservice.StartHogs(c.hogs, []string{"sh", "-c", "while :; do :; done"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = h.Stop() })
			}
			for i := range b.N {
				got, base := runHerd(b, uint64(9+i), c.form)
				b.ReportMetric(got.perTranscript, "requests/transcript")
				b.ReportMetric(base.perTranscript, "baseline-requests/transcript")
				b.ReportMetric(got.overLimitPerCooldown, "overlimit429s/cooldown")
				b.ReportMetric(base.overLimitPerCooldown, "baseline-overlimit429s/cooldown")
				b.ReportMetric(got.elapsed.Seconds(), "s-to-last-transcript")
				b.ReportMetric(base.elapsed.Seconds(), "baseline-s-to-last-transcript")
				b.ReportMetric(float64(got.violations), "submissions-in-cooldown")
				b.ReportMetric(float64(base.violations), "baseline-submissions-in-cooldown")
				b.ReportMetric(got.reopenLag.Seconds(), "s-idle-after-cooldown")
				b.ReportMetric(base.reopenLag.Seconds(), "baseline-s-idle-after-cooldown")
				// The exact rule (ledger.SubmissionAccounting): must be 0
				// ignored; in flight counted apart, with the gap.
				b.ReportMetric(float64(got.acc.IgnoredKnownCooldown), "ignored-known-cooldown")
				b.ReportMetric(float64(got.acc.InFlight), "in-flight-at-announcement")
				b.ReportMetric(float64(got.acc.GapP50.Microseconds())/1000, "gap-p50-ms")
				b.ReportMetric(float64(got.acc.GapP99.Microseconds())/1000, "gap-p99-ms")
				b.Logf("callscribe (window): %s", got)
				b.Logf("per-worker sleepers: %s", base)
				b.Logf("exact rule: %d of %d submissions ignored a known cooldown; %d in flight at an announcement; admission-to-send gap p50 %s, p99 %s, max %s (%d CPU hogs)",
					got.acc.IgnoredKnownCooldown, got.acc.Submissions, got.acc.InFlight, got.acc.GapP50, got.acc.GapP99, got.acc.GapMax, c.hogs)
				if got.acc.IgnoredKnownCooldown > 0 {
					b.Errorf("%d submissions ignored a known cooldown: %+v", got.acc.IgnoredKnownCooldown, got.acc.Ignored)
				}
				b.ReportMetric(got.closed.Seconds(), "s-closed-by-announcements")
				b.Logf("completion: %.2f× the baseline's time; the deadlines the vendor announced to callscribe kept the scope closed for %s in all",
					got.elapsed.Seconds()/base.elapsed.Seconds(), got.closed.Round(100*time.Millisecond))
			}
		})
	}
}

// runHerd runs the herd scenario in this process with 60 workers and the
// window, then the sleepers, and returns both runs' figures.
func runHerd(b *testing.B, seed uint64, form sttsim.RetryAfterForm) (got, base herdFigures) {
	const n = 120
	rdb := testredis.Client(b)
	w, err := capacity.NewWindows(capRedis(b, rdb, testredis.Prefix(b, rdb, "herd-bench")), capacity.WindowConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	e, files := setupWith(b, herdVendorForm(seed, nil, form), jobs.Config{BatchWorkers: 60, ProbeWait: 100 * time.Millisecond,
		RetryAfter: retryafter.Policy{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}, n, jobs.Deps{Window: w})
	ctx := context.Background()
	var items []sleepers.Item
	for i, f := range files {
		rec, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f})
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, sleepers.Item{Key: rec.Recording.BusinessKey, TenantID: "t1", CallID: rec.Recording.CallID,
			AudioURL: "file://" + f, AudioSHA256: rec.Recording.AudioSHA256, AudioBytes: rec.Recording.AudioBytes})
	}
	b.StartTimer()
	start := time.Now()
	if err := e.client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.client.StopAndCancel(context.WithoutCancel(ctx)) }()
	var counts map[ledger.State]int
	if !testwait.Until(3*time.Minute, e.changes, func() bool {
		counts, err = e.ledger.CountByState(ctx)
		return err == nil && counts[ledger.StateValidated]+counts[ledger.StateFailed]+counts[ledger.StateExpired] == n
	}) {
		b.Fatalf("recordings still open after 3m: %v", counts)
	}
	got = figuresOf(e.sim.Stats(), time.Since(start))
	b.StopTimer()
	exts, err := e.ledger.ScopeDeferralExtensions(ctx, e.pipeline.Config().Tenants["t1"].Scope)
	if err != nil {
		b.Fatal(err)
	}
	got.closed = closedByAnnouncements(e.sim.Stats(), exts)
	if got.acc, err = e.ledger.SubmissionAccounting(ctx, nil, time.Time{}); err != nil {
		b.Fatal(err)
	}

	bsim, err := sttsim.New(herdVendorForm(seed, nil, form))
	if err != nil {
		b.Fatal(err)
	}
	bsrv := httptest.NewServer(bsim.Handler())
	defer bsrv.Close()
	prov, err := stt.New("generic-http", stt.Config{BaseURL: bsrv.URL, APIKey: "sim-key", Model: "general"})
	if err != nil {
		b.Fatal(err)
	}
	res, err := sleepers.Run(ctx, sleepers.Config{Provider: prov, Workers: 60, PollInterval: 50 * time.Millisecond,
		RetryAfter: retryafter.Policy{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}, items)
	if err != nil {
		b.Fatal(err)
	}
	return got, figuresOf(bsim.Stats(), res.Elapsed)
}

// closedByAnnouncements is how long the deadlines the vendor announced kept
// the scope closed to a client that honours them: for each cooldown, from
// its start to the latest deadline recorded while it lasted (at least its
// real end). A client that honours every announcement cannot finish
// sooner than this, whatever its scheduling.
func closedByAnnouncements(st sttsim.Stats, exts []ledger.ExtensionRecord) time.Duration {
	var sum time.Duration
	for _, cd := range st.Cooldowns {
		until := cd.Deadline
		for _, x := range exts {
			if !x.At.Before(cd.StartedAt.Add(-time.Second)) && x.At.Before(cd.Deadline) && x.ResultingNotBefore.After(until) {
				until = x.ResultingNotBefore
			}
		}
		sum += until.Sub(cd.StartedAt)
	}
	return sum
}
