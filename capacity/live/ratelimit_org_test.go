package live_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// grants records the Redis time (µs) of every counted start, by campaign;
// safe for concurrent use.
type grants struct {
	mu sync.Mutex
	at map[string][]int64 // campaign → Redis times, in the order granted
}

func (g *grants) record(_, campaign string, atUs int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at == nil {
		g.at = map[string][]int64{}
	}
	g.at[campaign] = append(g.at[campaign], atUs)
}

// all returns every grant's Redis time, ascending.
func (g *grants) all() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var all []int64
	for _, at := range g.at {
		all = append(all, at...)
	}
	slices.Sort(all)
	return all
}

func (g *grants) of(campaign string) []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(slices.Values(g.at[campaign]))
}

// checkWindow fails t unless at (ascending Redis times in µs) holds at
// most limit starts in every one-second window (t−1s, t]: the script
// counts a start only while fewer than limit are in the window, and
// trims those at or before now−1s, so any limit+1 starts in a row span at
// least a full second. This is exact: the sliding window has no burst
// beyond the limit.
func checkWindow(t *testing.T, what string, at []int64, limit int) {
	t.Helper()
	for i := 0; i+limit < len(at); i++ {
		if span := at[i+limit] - at[i]; span < live.RateWindow.Microseconds() {
			t.Errorf("%s: starts %d–%d (%d starts) within %dµs of Redis time, want at most %d in any second", what, i, i+limit, limit+1, span, limit)
		}
	}
}

// hammer runs workers goroutines, worker i starting calls of campaigns[i %
// len(campaigns)] of org as fast as the limiter lets it (waiting up to
// 300ms inside Wait, else as long as a refusal's RetryAfter), until d has
// passed; it returns how many refusals named each limit.
func hammer(t *testing.T, r *live.RateLimiter, org string, campaigns []string, workers int, d time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	refusedBy := map[string]int{}
	var wg sync.WaitGroup
	for i := range workers {
		camp := campaigns[i%len(campaigns)]
		wg.Go(func() {
			for ctx.Err() == nil {
				// A wait shorter than a campaign's gap, so that refusals
				// are seen and the worker asks again.
				err := r.Wait(ctx, org, camp, 300*time.Millisecond)
				var rl *live.RateLimitedError
				switch {
				case errors.As(err, &rl):
					mu.Lock()
					refusedBy[rl.LimitedBy]++
					mu.Unlock()
					// As a client honouring Retry-After does.
					retry := time.NewTimer(rl.RetryAfter)
					select {
					case <-ctx.Done():
					case <-retry.C:
					}
					retry.Stop()
				case err != nil && ctx.Err() == nil:
					t.Errorf("start of %s/%s: %v", org, camp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return refusedBy
}

// An organisation of 20 campaigns at 1 start a second each, with an
// organisation rate of 5 a second, starts at most 5 calls in any second
// of Redis time however hard its campaigns push, and keeps starting
// calls near that rate.
func TestRateLimiterOrgRateAcrossCampaigns(t *testing.T) {
	t.Parallel()
	rdb, prefix := testredis.New(t, "live")
	g := &grants{}
	const orgRate, run = 5, 4 * time.Second
	r, err := live.NewRateLimiter(captest.OnRedis(t, rdb, prefix),
		live.WithRateTestGranted(live.RateLimiterConfig{PerSecond: 1, Orgs: map[string]int{"acme": orgRate}}, g.record))
	if err != nil {
		t.Fatal(err)
	}
	campaigns := make([]string, 20)
	for i := range campaigns {
		campaigns[i] = fmt.Sprintf("c%02d", i)
	}
	refusedBy := hammer(t, r, "acme", campaigns, 2*len(campaigns), run)

	all := g.all()
	checkWindow(t, "organisation acme", all, orgRate)
	for _, c := range campaigns {
		checkWindow(t, "campaign "+c, g.of(c), 1)
	}
	// Starts kept coming: at the rate, a 4 s run starts 20 to 25 calls
	// (5 at once, then 5 a second); half the rate is a wide margin.
	if min := int(run.Seconds()) * orgRate / 2; len(all) < min {
		t.Errorf("%d starts in %s, want at least %d (half of %d a second)", len(all), run, min, orgRate)
	}
	if refusedBy[live.LimitedByOrg] == 0 {
		t.Errorf("no refusal named the organisation's rate (refusals %v)", refusedBy)
	}
	t.Logf("%d starts in %s across %d campaigns; refusals %v", len(all), run, len(campaigns), refusedBy)
}

// A campaign at 1 start a second in an organisation at 100 a second
// still starts at most one call a second: the organisation's rate does not
// lift the campaign's.
func TestRateLimiterCampaignRateUnderOrgRate(t *testing.T) {
	t.Parallel()
	rdb, prefix := testredis.New(t, "live")
	g := &grants{}
	const run = 3 * time.Second
	r, err := live.NewRateLimiter(captest.OnRedis(t, rdb, prefix), live.WithRateTestGranted(live.RateLimiterConfig{
		Campaigns: map[string]map[string]int{"acme": {"solo": 1, "busy": 10}}, Orgs: map[string]int{"acme": 100}}, g.record))
	if err != nil {
		t.Fatal(err)
	}
	// Ten workers on solo, two on busy (whose starts the organisation's
	// window counts too, far below 100).
	refusedBy := hammer(t, r, "acme", []string{"solo", "solo", "solo", "solo", "solo", "busy"}, 12, run)

	solo := g.of("solo")
	checkWindow(t, "campaign solo", solo, 1)
	checkWindow(t, "campaign busy", g.of("busy"), 10)
	checkWindow(t, "organisation acme", g.all(), 100)
	// At 1 a second, a 3 s run starts 3 or 4; at least 2 is a wide margin.
	if len(solo) < 2 {
		t.Errorf("solo started %d calls in %s, want at least 2", len(solo), run)
	}
	if refusedBy[live.LimitedByOrg] != 0 || refusedBy[live.LimitedByCampaign] == 0 {
		t.Errorf("refusals %v, want only the campaign's", refusedBy)
	}
	t.Logf("solo %d starts, busy %d in %s; refusals %v", len(solo), len(g.of("busy")), run, refusedBy)
}

// A refusal names the limit that refused and counts the start against
// neither; Retry-After is the longer of the two waits.
func TestRateLimiterOrgRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "live")
	const t0 = int64(1_800_000_000_000) // Unix ms
	now := t0
	r, err := live.NewRateLimiter(captest.OnRedis(t, rdb, prefix), live.WithRateTestNow(live.RateLimiterConfig{
		PerSecond: 1, Campaigns: map[string]map[string]int{"acme": {"wide": 5}}, Orgs: map[string]int{"acme": 2}}, func() int64 { return now }))
	if err != nil {
		t.Fatal(err)
	}
	card := func(key string) int64 { return rdb.ZCard(ctx, prefix+":{acme}:"+key).Val() }
	refusal := func(campaign string) *live.RateLimitedError {
		t.Helper()
		var rl *live.RateLimitedError
		if err := r.Wait(ctx, "acme", campaign, 0); !errors.As(err, &rl) || !errors.Is(err, live.ErrRateLimited) {
			t.Fatalf("start of %q at +%dms = %v, want a *RateLimitedError", campaign, now-t0, err)
		}
		return rl
	}
	if r.OrgLimit("acme") != 2 || r.OrgLimit("other") != 0 {
		t.Fatalf("OrgLimit = %d, %d; want 2, 0", r.OrgLimit("acme"), r.OrgLimit("other"))
	}
	if err := r.Wait(ctx, "acme", "b", 0); err != nil { // +0: org [0]
		t.Fatal(err)
	}
	now = t0 + 300
	if err := r.Wait(ctx, "acme", "a", 0); err != nil { // +300: org [0 300]
		t.Fatal(err)
	}
	now = t0 + 500
	// Both full: the campaign waits until +1300 (800ms), the organisation
	// until +1000 (500ms); the longer wait wins and names the campaign.
	if rl := refusal("a"); rl.LimitedBy != live.LimitedByCampaign || rl.Limit != 1 || rl.RetryAfter != 800*time.Millisecond {
		t.Fatalf("a at +500: %+v, want campaign, limit 1, 800ms", rl)
	}
	// Only the organisation is full: wide has room of its own.
	rl := refusal("wide")
	if rl.LimitedBy != live.LimitedByOrg || rl.Limit != 2 || rl.RetryAfter != 500*time.Millisecond || rl.Campaign != "wide" {
		t.Fatalf("wide at +500: %+v, want org, limit 2, 500ms", rl)
	}
	if msg := rl.Error(); msg != `capacity: org "acme" started 2 calls in the last second across its campaigns (the organisation's start rate); next start of campaign "wide" in 500ms` {
		t.Fatalf("message %q", msg)
	}
	// Neither refusal was counted anywhere.
	if card("starts:wide") != 0 || card("starts:a") != 1 || card("org-starts") != 2 {
		t.Fatalf("sets hold wide %d, a %d, org %d; want 0, 1, 2", card("starts:wide"), card("starts:a"), card("org-starts"))
	}
	// When the organisation's first start leaves the window, wide starts.
	now = t0 + 1000
	if err := r.Wait(ctx, "acme", "wide", 0); err != nil {
		t.Fatalf("wide at +1000: %v", err)
	}
	// Another organisation has no organisation rate: only its campaigns'.
	for _, c := range []string{"a", "b", "c", "d"} {
		if err := r.Wait(ctx, "other", c, 0); err != nil {
			t.Fatalf("other/%s: %v", c, err)
		}
	}
	if n := rdb.Exists(ctx, prefix+":{other}:org-starts").Val(); n != 0 {
		t.Fatalf("an organisation without a rate has an org-starts set")
	}
}
