package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
)

// Defaults and bounds of RateLimiterConfig.
const (
	// StartRateDefault is an organisation's calls started per second when
	// RateLimiterConfig names none for it.
	StartRateDefault = 5
	// StartRateMax is the largest start rate RateLimiterConfig accepts.
	StartRateMax = 20
	// RateWindow is the sliding window the start rate is counted over.
	RateWindow = time.Second
)

// ErrRateLimited is what RateLimiter.Wait returns, wrapped in a
// *RateLimitedError, when no start token frees up before the timeout.
var ErrRateLimited = errors.New("capacity: call start rate limited")

// RateLimitedError says which organisation's start rate was exhausted.
// errors.Is(err, ErrRateLimited) is true for it.
type RateLimitedError struct {
	Org   string
	Limit int // calls per second
	// RetryAfter is how long until the next token frees up, as Redis last
	// reported it.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("capacity: org %q started %d calls in the last second; next start in %s", e.Org, e.Limit, e.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// RateLimiterConfig configures NewRateLimiter.
type RateLimiterConfig struct {
	// KeyPrefix prefixes every Redis key. Default "": capacity.KeyPrefixDefault.
	KeyPrefix string
	// PerSecond is the start rate, 1–StartRateMax, of an organisation not
	// listed in Orgs. Default 0: StartRateDefault (5).
	PerSecond int
	// Orgs maps an organisation to its start rate, 1–StartRateMax.
	// Default nil: every organisation gets PerSecond.
	Orgs map[string]int
	// OpTimeout bounds each Redis round trip.
	// Default 0: capacity.SlotsOpTimeoutDefault (1s).
	OpTimeout time.Duration
	// Logger receives the fail-open warnings. Default nil: discard.
	Logger *slog.Logger
	// WarnInterval is the least time between two fail-open warnings.
	// Default 0: capacity.WarnIntervalDefault (1m).
	WarnInterval time.Duration
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c RateLimiterConfig) WithDefaults() RateLimiterConfig {
	if c.KeyPrefix == "" {
		c.KeyPrefix = capacity.KeyPrefixDefault
	}
	if c.PerSecond == 0 {
		c.PerSecond = StartRateDefault
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = capacity.SlotsOpTimeoutDefault
	}
	if c.WarnInterval == 0 {
		c.WarnInterval = capacity.WarnIntervalDefault
	}
	return c
}

func (c RateLimiterConfig) validate() error {
	if c.PerSecond < 1 || c.PerSecond > StartRateMax {
		return fmt.Errorf("RateLimiterConfig.PerSecond must be 1–%d, got %d", StartRateMax, c.PerSecond)
	}
	if c.OpTimeout < 0 {
		return fmt.Errorf("RateLimiterConfig.OpTimeout must not be negative, got %s", c.OpTimeout)
	}
	orgs := make([]string, 0, len(c.Orgs))
	for org := range c.Orgs {
		orgs = append(orgs, org)
	}
	sort.Strings(orgs)
	for _, org := range orgs {
		if n := c.Orgs[org]; n < 1 || n > StartRateMax {
			return fmt.Errorf("RateLimiterConfig.Orgs[%q] must be 1–%d, got %d", org, StartRateMax, n)
		}
	}
	return nil
}

// RateLimiter limits how many calls each organisation starts per second,
// over a one-second sliding window counted in Redis. It is separate from
// Slots and safe for concurrent use.
type RateLimiter struct {
	rdb  redis.UniversalClient
	cfg  RateLimiterConfig
	fail *capacity.FailOpen
}

// NewRateLimiter returns a RateLimiter counting in rdb, or an error naming
// the field (and organisation) cfg gets wrong.
func NewRateLimiter(rdb redis.UniversalClient, cfg RateLimiterConfig) (*RateLimiter, error) {
	if rdb == nil {
		return nil, errors.New("live.NewRateLimiter: Redis client is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &RateLimiter{rdb: rdb, cfg: cfg, fail: capacity.NewFailOpen(cfg.Logger, cfg.WarnInterval, nil)}, nil
}

// Limit returns org's start rate, in calls per second.
func (r *RateLimiter) Limit(org string) int {
	if n, ok := r.cfg.Orgs[org]; ok {
		return n
	}
	return r.cfg.PerSecond
}

// Uncounted returns how many starts went ahead without Redis.
func (r *RateLimiter) Uncounted() int64 { return r.fail.Uncounted() }

// rateTakeScript: KEYS the organisation's start set; ARGV now ("": Redis
// TIME, see capacity.NowScript), limit, start ID. Trims starts older than
// the window, and records this start if fewer than limit remain: {1, 0};
// otherwise {0, µs until the oldest start leaves the window}. Starts are
// scored in microseconds (now_us).
var rateTakeScript = capacity.NowScript(`
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

// Wait takes a start token for org, waiting up to timeout for one. It
// sleeps until the oldest start leaves the window (no polling in between)
// and returns a *RateLimitedError (errors.Is ErrRateLimited) as soon as
// the next token cannot free up before the timeout; ctx's error if ctx
// ends first. When Redis cannot be reached it lets the start through
// uncounted (fail open) and returns nil.
func (r *RateLimiter) Wait(ctx context.Context, org string, timeout time.Duration) error {
	limit := r.Limit(org)
	key := capacity.Key(r.cfg.KeyPrefix, org, "starts")
	id, err := newStartID()
	if err != nil {
		r.fail.Note("rate wait", err)
		return nil
	}
	deadline := time.Now().Add(timeout)
	var timer *time.Timer
	for {
		octx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
		res, err := rateTakeScript.Run(octx, r.rdb, []string{key}, "", limit, id).Int64Slice()
		cancel()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("rate script returned %d values, want 2", len(res))
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting to start a call for org %q: %w", org, ctx.Err())
			}
			r.fail.Note("rate wait", err)
			return nil
		}
		if res[0] == 1 {
			return nil
		}
		wait := time.Duration(res[1]) * time.Microsecond
		if time.Now().Add(wait).After(deadline) {
			return &RateLimitedError{Org: org, Limit: limit, RetryAfter: wait}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting to start a call for org %q: %w", org, ctx.Err())
		case <-timer.C:
		}
	}
}

// newStartID names one start in the organisation's start set.
func newStartID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making start ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
