package live_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// startsModel is what the start sets should hold: each set's start times
// (Unix µs of the test's clock), oldest first, by key suffix
// ("{acme}:starts:a", "{acme}:org-starts").
type startsModel map[string][]int64

// room trims key's starts at or before now−1s, as the script does, and
// returns how long until it holds fewer than limit (0: now).
func (m startsModel) room(key string, nowUs int64, limit int) int64 {
	window := live.RateWindow.Microseconds()
	m[key] = slices.DeleteFunc(m[key], func(at int64) bool { return at <= nowUs-window })
	n := len(m[key])
	if n < limit {
		return 0
	}
	return max(m[key][n-limit]+window-nowUs, 1)
}

// TestRateLimiterProperty runs random starts and clock moves through two
// RateLimiters (two processes, configured differently, as during a
// rolling change) on one Redis against a model of the combined script: a
// start is counted in both its campaign's and its organisation's set
// exactly when both have room under the asking limiter's rates, and in
// neither otherwise; a refusal names the limit with the longer wait and
// waits exactly that long; an organisation without a rate has no set
// touched.
func TestRateLimiterProperty(t *testing.T) {
	t.Parallel()
	rdb, _ := testredis.New(t, "live")
	ctx := context.Background()
	cfgs := [2]live.RateLimiterConfig{
		{PerSecond: 2, Campaigns: map[string]map[string]int{"acme": {"a": 3}}, Orgs: map[string]int{"acme": 4}},
		{PerSecond: 1, Campaigns: map[string]map[string]int{"acme": {"": 2}}, OrgPerSecond: 2, Orgs: map[string]int{"acme": 2}},
	}
	rapid.Check(t, func(rt *rapid.T) {
		prefix := testredis.UniquePrefix("live", t.Name())
		defer testredis.DeleteKeys(rdb, prefix)
		nowMs := int64(1_800_000_000_000)
		var limiters [2]*live.RateLimiter
		for i, cfg := range cfgs {
			var err error
			if limiters[i], err = live.NewRateLimiter(captest.OnRedis(rt, rdb, prefix), live.WithRateTestNow(cfg, func() int64 { return nowMs })); err != nil {
				rt.Fatal(err)
			}
		}
		model := startsModel{}
		rt.Repeat(map[string]func(*rapid.T){
			"start": func(rt *rapid.T) {
				i := rapid.IntRange(0, 1).Draw(rt, "limiter")
				org := rapid.SampledFrom([]string{"acme", "beta"}).Draw(rt, "org")
				camp := rapid.SampledFrom([]string{"a", "b", ""}).Draw(rt, "campaign")
				r := limiters[i]
				limit, orgLimit := r.Limit(org, camp), r.OrgLimit(org)
				campKey, orgKey := "{"+org+"}:starts:"+camp, "{"+org+"}:org-starts"
				nowUs := nowMs * 1000
				campWait, orgWait := model.room(campKey, nowUs, limit), int64(0)
				if orgLimit > 0 {
					orgWait = model.room(orgKey, nowUs, orgLimit)
				}
				err := r.Wait(ctx, org, camp, 0)
				var rl *live.RateLimitedError
				switch {
				case campWait == 0 && orgWait == 0:
					if err != nil {
						rt.Fatalf("%d: start of %s/%q = %v, want it counted (campaign %v, org %v)", i, org, camp, err, model[campKey], model[orgKey])
					}
					model[campKey] = append(model[campKey], nowUs)
					if orgLimit > 0 {
						model[orgKey] = append(model[orgKey], nowUs)
					}
				case !errors.As(err, &rl):
					rt.Fatalf("%d: start of %s/%q = %v, want refused (campaign wait %dµs, org wait %dµs)", i, org, camp, err, campWait, orgWait)
				default:
					want := live.RateLimitedError{Org: org, Campaign: camp, LimitedBy: live.LimitedByOrg, Limit: orgLimit, RetryAfter: time.Duration(orgWait) * time.Microsecond}
					if campWait > orgWait {
						want.LimitedBy, want.Limit, want.RetryAfter = live.LimitedByCampaign, limit, time.Duration(campWait)*time.Microsecond
					}
					if *rl != want {
						rt.Fatalf("%d: refusal %+v, want %+v", i, *rl, want)
					}
				}
				for _, key := range []string{campKey, orgKey} {
					if got := scores(rt, rdb, prefix+":"+key); !slices.Equal(got, model[key]) {
						rt.Fatalf("%s holds %v, want %v", key, got, model[key])
					}
				}
			},
			"advance": func(rt *rapid.T) {
				nowMs += rapid.Int64Range(1, 700).Draw(rt, "ms")
			},
		})
	})
}

// scores returns the start times in key, oldest first.
func scores(rt *rapid.T, rdb *redis.Client, key string) []int64 {
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		rt.Fatal(err)
	}
	var at []int64
	for _, z := range zs {
		at = append(at, int64(z.Score))
	}
	return at
}
