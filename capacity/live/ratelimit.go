package live

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// Defaults and bounds of RateLimiterConfig.
const (
	// StartRateDefault is a campaign's calls started per second when
	// RateLimiterConfig names none for it.
	StartRateDefault = 1
	// StartRateMax is the largest campaign start rate RateLimiterConfig
	// accepts.
	StartRateMax = 20
	// OrgStartRateDefault is an organisation's calls started per second,
	// across all its campaigns, when RateLimiterConfig names none for it:
	// 0, no organisation rate, so that each campaign has only its own, as
	// before the organisation rate existed. Setting one is the operator's
	// choice: a default above 0 would start refusing the calls of every
	// organisation running more campaigns at once than it allows.
	OrgStartRateDefault = 0
	// OrgStartRateMax is the largest organisation start rate
	// RateLimiterConfig accepts.
	OrgStartRateMax = 1000
	// RateWindow is the sliding window the start rates are counted over.
	RateWindow = time.Second
)

// The limits a start is counted against, as RateLimitedError.LimitedBy
// names them.
const (
	// LimitedByCampaign: the campaign's own start rate refused the start.
	LimitedByCampaign = "campaign"
	// LimitedByOrg: the organisation's start rate, shared by all its
	// campaigns, refused the start.
	LimitedByOrg = "org"
)

// ErrRateLimited is what RateLimiter.Wait returns, wrapped in a
// *RateLimitedError, when no start token frees up before the timeout.
var ErrRateLimited = errors.New("capacity: call start rate limited")

// RateLimitedError says whose start rate was exhausted: the campaign's or
// its organisation's. errors.Is(err, ErrRateLimited) is true for it.
type RateLimitedError struct {
	Org      string
	Campaign string // "" for the organisation's calls without a campaign
	// LimitedBy names the limit that refused: LimitedByCampaign or
	// LimitedByOrg. When both refused, the one with the longer wait (the
	// organisation's on a tie).
	LimitedBy string
	// Limit is the refusing limit's rate, in calls per second.
	Limit int
	// RetryAfter is how long until both limits have room again (the
	// longer of their waits), as Redis last reported it.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	if e.LimitedBy == LimitedByOrg {
		return fmt.Sprintf("capacity: org %q started %d calls in the last second across its campaigns (the organisation's start rate); next start of campaign %q in %s", e.Org, e.Limit, e.Campaign, e.RetryAfter)
	}
	return fmt.Sprintf("capacity: org %q campaign %q started %d calls in the last second (the campaign's start rate); next start in %s", e.Org, e.Campaign, e.Limit, e.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// RateLimiterConfig configures NewRateLimiter.
type RateLimiterConfig struct {
	// PerSecond is the start rate, 1–StartRateMax, of a campaign not
	// listed in Campaigns. Default 0: StartRateDefault (1).
	PerSecond int
	// Campaigns maps an organisation, then one of its campaigns, to the
	// campaign's start rate, 1–StartRateMax. The campaign "" is the
	// organisation's calls without a campaign. Default nil: every
	// campaign gets PerSecond.
	Campaigns map[string]map[string]int
	// OrgPerSecond is the start rate, 0–OrgStartRateMax, of an
	// organisation not listed in Orgs: the calls it starts per second
	// across all its campaigns and its calls without a campaign, counted
	// beside each campaign's own rate. Default 0: OrgStartRateDefault, no
	// organisation rate (an organisation with twenty campaigns at 1/s
	// then starts up to twenty calls a second).
	OrgPerSecond int
	// Orgs maps an organisation to its start rate, 1–OrgStartRateMax.
	// Default nil: every organisation gets OrgPerSecond.
	Orgs map[string]int

	// testNow, when set, replaces Redis TIME in the script (Unix
	// milliseconds) and keeps start sets a minute (the test's clock does
	// not follow Redis's expiry). Test builds only: WithRateTestNow.
	testNow func() int64
	// granted, when set, is told the Redis time (Unix microseconds) of
	// every counted start. Test builds only: WithRateTestGranted.
	granted func(org, campaign string, atUs int64)
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c RateLimiterConfig) WithDefaults() RateLimiterConfig {
	c.PerSecond = cmp.Or(c.PerSecond, StartRateDefault)
	c.OrgPerSecond = cmp.Or(c.OrgPerSecond, OrgStartRateDefault)
	return c
}

func (c RateLimiterConfig) validate() error {
	var errs []error
	if c.PerSecond < 1 || c.PerSecond > StartRateMax {
		errs = append(errs, fmt.Errorf("RateLimiterConfig.PerSecond must be 1–%d, got %d", StartRateMax, c.PerSecond))
	}
	for _, org := range slices.Sorted(maps.Keys(c.Campaigns)) {
		if err := capacity.CheckID("org", org); err != nil {
			errs = append(errs, fmt.Errorf("RateLimiterConfig.Campaigns[%q]: %w", org, err))
		}
		for _, camp := range slices.Sorted(maps.Keys(c.Campaigns[org])) {
			if camp != "" {
				if err := capacity.CheckID("campaign", camp); err != nil {
					errs = append(errs, fmt.Errorf("RateLimiterConfig.Campaigns[%q][%q]: %w", org, camp, err))
				}
			}
			if n := c.Campaigns[org][camp]; n < 1 || n > StartRateMax {
				errs = append(errs, fmt.Errorf("RateLimiterConfig.Campaigns[%q][%q] must be 1–%d, got %d", org, camp, StartRateMax, n))
			}
		}
	}
	if c.OrgPerSecond < 0 || c.OrgPerSecond > OrgStartRateMax {
		errs = append(errs, fmt.Errorf("RateLimiterConfig.OrgPerSecond must be 0–%d (0: no organisation rate), got %d", OrgStartRateMax, c.OrgPerSecond))
	}
	for _, org := range slices.Sorted(maps.Keys(c.Orgs)) {
		if err := capacity.CheckID("org", org); err != nil {
			errs = append(errs, fmt.Errorf("RateLimiterConfig.Orgs[%q]: %w", org, err))
		}
		if n := c.Orgs[org]; n < 1 || n > OrgStartRateMax {
			errs = append(errs, fmt.Errorf("RateLimiterConfig.Orgs[%q] must be 1–%d, got %d", org, OrgStartRateMax, n))
		}
	}
	return errors.Join(errs...)
}

// RateLimiter limits how many calls each campaign of each organisation,
// and each organisation across its campaigns, starts per second, over a
// one-second sliding window counted in Redis. A start is counted against
// both limits at once or against neither. It is separate from Slots and
// safe for concurrent use.
type RateLimiter struct {
	kit  rediskit.Kit
	cfg  RateLimiterConfig
	fail *rediskit.FailOpen
}

// NewRateLimiter returns a RateLimiter counting in r, each round trip
// bounded by capacity.RedisConfig.AdmitOpTimeout, or an error naming the
// field (and organisation and campaign) cfg gets wrong.
func NewRateLimiter(r *capacity.Redis, cfg RateLimiterConfig) (*RateLimiter, error) {
	if r == nil {
		return nil, errors.New("live.NewRateLimiter: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kit := r.Kit().Admission()
	return &RateLimiter{kit: kit, cfg: cfg, fail: kit.NewFailOpen()}, nil
}

// Limit returns the start rate of org's campaign ("" for its calls
// without a campaign), in calls per second.
func (r *RateLimiter) Limit(org, campaign string) int {
	if n, ok := r.cfg.Campaigns[org][campaign]; ok {
		return n
	}
	return r.cfg.PerSecond
}

// OrgLimit returns org's start rate across its campaigns, in calls per
// second; 0: org has none, only its campaigns' own.
func (r *RateLimiter) OrgLimit(org string) int {
	if n, ok := r.cfg.Orgs[org]; ok {
		return n
	}
	return r.cfg.OrgPerSecond
}

// Uncounted returns how many starts went ahead without Redis.
func (r *RateLimiter) Uncounted() int64 { return r.fail.Uncounted() }

// startsTTL is how long a start set lives after its newest start: past
// the window, nothing in it counts.
const startsTTL = 2 * RateWindow

// rateTakeScript: KEYS the campaign's start set, the organisation's start
// set; ARGV now ("": Redis TIME, see rediskit.NowScript), campaign limit,
// organisation limit (0: none, its set is not touched), start ID, the
// sets' TTL in ms. Trims starts older than the window from each set it
// counts; when the campaign's set holds fewer than its limit and the
// organisation's fewer than its own, records this start in both and
// returns {1, 0, 0, now_us}; otherwise records nothing and returns {0, µs
// until both have room, 1 (campaign) or 2 (organisation): the set with
// the longer wait (the organisation's on a tie), now_us}. A set over its
// limit (a process that allowed more) has room once enough of its oldest
// starts have left the window, not only the first. Starts are scored in
// microseconds (now_us).
var rateTakeScript = rediskit.NowScript(`
local window = 1000000
local function wait_for(key, limit)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_us - window)
  local n = redis.call('ZCARD', key)
  if n < limit then return 0 end
  local nth = redis.call('ZRANGE', key, n - limit, n - limit, 'WITHSCORES')
  local wait = tonumber(nth[2]) + window - now_us
  if wait < 1 then wait = 1 end
  return wait
end
local camp_limit, org_limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local camp_wait = wait_for(KEYS[1], camp_limit)
local org_wait = 0
if org_limit > 0 then org_wait = wait_for(KEYS[2], org_limit) end
if camp_wait == 0 and org_wait == 0 then
  redis.call('ZADD', KEYS[1], now_us, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  if org_limit > 0 then
    redis.call('ZADD', KEYS[2], now_us, ARGV[4])
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
  end
  return {1, 0, 0, now_us}
end
if org_wait >= camp_wait then return {0, org_wait, 2, now_us} end
return {0, camp_wait, 1, now_us}
`)

// Wait takes a start token for org's campaign ("" for a call without a
// campaign), waiting up to timeout for one. Each (organisation, campaign)
// has its own window and rate (Limit), and each organisation with a rate
// (OrgLimit) one more window shared by all its campaigns: a start is
// taken only when both have room, in one Redis script, and neither counts
// it otherwise. It sleeps until both have room (no polling in between)
// and returns a *RateLimitedError (errors.Is ErrRateLimited) naming the
// refusing limit as soon as the next token cannot free up before the
// timeout; ctx's error if ctx ends first. When Redis cannot be reached it
// lets the start through uncounted (fail open) and returns nil.
func (r *RateLimiter) Wait(ctx context.Context, org, campaign string, timeout time.Duration) error {
	_, err := r.Take(ctx, org, campaign, timeout)
	return err
}

// Take is Wait that also says whether the start was counted: uncounted is
// true when Redis could not be reached and the start went through
// uncounted (fail open, err nil).
func (r *RateLimiter) Take(ctx context.Context, org, campaign string, timeout time.Duration) (uncounted bool, err error) {
	limit, orgLimit := r.Limit(org, campaign), r.OrgLimit(org)
	// The organisation is the hash tag of both sets; a campaign id is
	// never empty, so "starts:" (no campaign) meets no campaign's key, and
	// "org-starts" is no campaign's.
	keys := []string{r.kit.Key(org, "starts", campaign), r.kit.Key(org, "org-starts")}
	id, err := newStartID()
	if err != nil {
		r.fail.Note("rate wait", err)
		return true, nil
	}
	ttl := startsTTL
	if r.cfg.testNow != nil {
		ttl = time.Minute
	}
	deadline := time.Now().Add(timeout)
	var timer *time.Timer
	for {
		now := ""
		if r.cfg.testNow != nil {
			now = rediskit.NowArg(r.cfg.testNow())
		}
		octx, cancel := r.kit.Op(ctx)
		res, err := rateTakeScript.Run(octx, r.kit.Client, keys, now, limit, orgLimit, id, ttl.Milliseconds()).Int64Slice()
		cancel()
		if err == nil && len(res) != 4 {
			err = fmt.Errorf("rate script returned %d values, want 4", len(res))
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("waiting to start a call for org %q campaign %q: %w", org, campaign, ctx.Err())
			}
			r.fail.Note("rate wait", err)
			return true, nil
		}
		if res[0] == 1 {
			if r.cfg.granted != nil {
				r.cfg.granted(org, campaign, res[3])
			}
			return false, nil
		}
		wait := time.Duration(res[1]) * time.Microsecond
		if time.Now().Add(wait).After(deadline) {
			rl := &RateLimitedError{Org: org, Campaign: campaign, LimitedBy: LimitedByCampaign, Limit: limit, RetryAfter: wait}
			if res[2] == 2 {
				rl.LimitedBy, rl.Limit = LimitedByOrg, orgLimit
			}
			return false, rl
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("waiting to start a call for org %q campaign %q: %w", org, campaign, ctx.Err())
		case <-timer.C:
		}
	}
}

// newStartID names one start in the campaign's start set.
func newStartID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making start ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
