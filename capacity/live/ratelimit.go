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
	// StartRateMax is the largest start rate RateLimiterConfig accepts.
	StartRateMax = 20
	// RateWindow is the sliding window the start rate is counted over.
	RateWindow = time.Second
)

// ErrRateLimited is what RateLimiter.Wait returns, wrapped in a
// *RateLimitedError, when no start token frees up before the timeout.
var ErrRateLimited = errors.New("capacity: call start rate limited")

// RateLimitedError says which campaign's start rate was exhausted.
// errors.Is(err, ErrRateLimited) is true for it.
type RateLimitedError struct {
	Org      string
	Campaign string // "" for the organisation's calls without a campaign
	Limit    int    // calls per second
	// RetryAfter is how long until the next token frees up, as Redis last
	// reported it.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("capacity: org %q campaign %q started %d calls in the last second; next start in %s", e.Org, e.Campaign, e.Limit, e.RetryAfter)
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
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c RateLimiterConfig) WithDefaults() RateLimiterConfig {
	c.PerSecond = cmp.Or(c.PerSecond, StartRateDefault)
	return c
}

func (c RateLimiterConfig) validate() error {
	if c.PerSecond < 1 || c.PerSecond > StartRateMax {
		return fmt.Errorf("RateLimiterConfig.PerSecond must be 1–%d, got %d", StartRateMax, c.PerSecond)
	}
	var errs []error
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
	return errors.Join(errs...)
}

// RateLimiter limits how many calls each campaign of each organisation
// starts per second, over a one-second sliding window counted in Redis. It is separate from
// Slots and safe for concurrent use.
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

// Uncounted returns how many starts went ahead without Redis.
func (r *RateLimiter) Uncounted() int64 { return r.fail.Uncounted() }

// rateTakeScript: KEYS the campaign's start set; ARGV now ("": Redis
// TIME, see rediskit.NowScript), limit, start ID. Trims starts older than
// the window, and records this start if fewer than limit remain: {1, 0};
// otherwise {0, µs until the oldest start leaves the window}. Starts are
// scored in microseconds (now_us).
var rateTakeScript = rediskit.NowScript(`
local window = 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_us - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now_us, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], 2000)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = tonumber(oldest[2]) + window - now_us
if wait < 1 then wait = 1 end
return {0, wait}
`)

// Wait takes a start token for org's campaign ("" for a call without a
// campaign), waiting up to timeout for one. Each (organisation, campaign)
// has its own window and rate (Limit). It
// sleeps until the oldest start leaves the window (no polling in between)
// and returns a *RateLimitedError (errors.Is ErrRateLimited) as soon as
// the next token cannot free up before the timeout; ctx's error if ctx
// ends first. When Redis cannot be reached it lets the start through
// uncounted (fail open) and returns nil.
func (r *RateLimiter) Wait(ctx context.Context, org, campaign string, timeout time.Duration) error {
	_, err := r.Take(ctx, org, campaign, timeout)
	return err
}

// Take is Wait that also says whether the start was counted: uncounted is
// true when Redis could not be reached and the start went through
// uncounted (fail open, err nil).
func (r *RateLimiter) Take(ctx context.Context, org, campaign string, timeout time.Duration) (uncounted bool, err error) {
	limit := r.Limit(org, campaign)
	// The organisation is the hash tag; a campaign id is never empty, so
	// "starts:" (no campaign) meets no campaign's key.
	key := r.kit.Key(org, "starts", campaign)
	id, err := newStartID()
	if err != nil {
		r.fail.Note("rate wait", err)
		return true, nil
	}
	deadline := time.Now().Add(timeout)
	var timer *time.Timer
	for {
		octx, cancel := r.kit.Op(ctx)
		res, err := rateTakeScript.Run(octx, r.kit.Client, []string{key}, "", limit, id).Int64Slice()
		cancel()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("rate script returned %d values, want 2", len(res))
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("waiting to start a call for org %q campaign %q: %w", org, campaign, ctx.Err())
			}
			r.fail.Note("rate wait", err)
			return true, nil
		}
		if res[0] == 1 {
			return false, nil
		}
		wait := time.Duration(res[1]) * time.Microsecond
		if time.Now().Add(wait).After(deadline) {
			return false, &RateLimitedError{Org: org, Campaign: campaign, Limit: limit, RetryAfter: wait}
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
