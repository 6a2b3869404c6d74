package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// NoCallerIDError says how full the pool was when Acquire gave up.
// errors.Is(err, ErrNoCallerID) is true for it.
type NoCallerIDError struct {
	Org string
	// Busy is how many numbers were held, Total how many the pool has.
	Busy, Total int
}

func (e *NoCallerIDError) Error() string {
	if e.Total == 0 {
		return fmt.Sprintf("capacity: no caller ID free for org %q: its pool is empty (add numbers with `callscribe caller-ids add`)", e.Org)
	}
	return fmt.Sprintf("capacity: no caller ID free for org %q: %d/%d busy", e.Org, e.Busy, e.Total)
}

// Is reports whether target is ErrNoCallerID.
func (e *NoCallerIDError) Is(target error) bool { return target == ErrNoCallerID }

// NumberError names a number CheckNumber refused. errors.Is(err,
// ErrInvalidNumber) is true for it.
type NumberError struct {
	// Field names where the number came from, such as "number".
	Field string
	// Value is the number as given, cut to 32 bytes.
	Value  string
	Reason string
}

func (e *NumberError) Error() string {
	return fmt.Sprintf("capacity: %s %q %s", e.Field, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidNumber.
func (e *NumberError) Is(target error) bool { return target == ErrInvalidNumber }

// CallerIDBusyError lists the numbers Remove refused to remove because
// calls hold them. errors.Is(err, ErrCallerIDBusy) is true for it.
type CallerIDBusyError struct {
	Org     string
	Numbers []string
}

func (e *CallerIDBusyError) Error() string {
	return fmt.Sprintf("capacity: org %q: caller IDs %v are in use; nothing removed (force to remove them anyway)", e.Org, e.Numbers)
}

// Is reports whether target is ErrCallerIDBusy.
func (e *CallerIDBusyError) Is(target error) bool { return target == ErrCallerIDBusy }

// CheckNumber returns a *NumberError naming field and the value unless v
// is an E.164 number: '+' then CallerIDDigitsMin–CallerIDDigitsMax
// digits, the first not 0.
func CheckNumber(field, v string) error {
	shown := v
	if len(shown) > 32 {
		shown = shown[:32] + "…"
	}
	bad := func(reason string) error { return &NumberError{Field: field, Value: shown, Reason: reason} }
	if v == "" {
		return &NumberError{Field: field, Reason: "is required: want an E.164 number such as +14155550123"}
	}
	if v[0] != '+' {
		return bad("must start with '+' (E.164, such as +14155550123)")
	}
	digits := v[1:]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return bad(fmt.Sprintf("has %q at byte %d: after '+' only digits are allowed (E.164)", rune(digits[i]), i+1))
		}
	}
	if len(digits) < CallerIDDigitsMin || len(digits) > CallerIDDigitsMax {
		return bad(fmt.Sprintf("has %d digits: want %d–%d after '+' (E.164)", len(digits), CallerIDDigitsMin, CallerIDDigitsMax))
	}
	if digits[0] == '0' {
		return bad("starts with +0: no E.164 country code starts with 0")
	}
	return nil
}

// CallerIDsConfig configures NewCallerIDs.
type CallerIDsConfig struct {
	// StaleAfter is how long a number may stay busy before the next
	// acquire of its organisation takes it back, as for call slots.
	// Default 0: StaleAfterDefault (20m).
	StaleAfter time.Duration
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c CallerIDsConfig) WithDefaults() CallerIDsConfig {
	c.StaleAfter = cmp.Or(c.StaleAfter, StaleAfterDefault)
	return c
}

// CallerIDs is each organisation's pool of outbound caller IDs (the
// numbers its calls dial from) in Redis: a number is held by one call at a
// time, and one whose holder never gave it back returns to the pool after
// StaleAfter. It is safe for concurrent use.
type CallerIDs struct {
	kit  rediskit.Kit
	cfg  CallerIDsConfig
	fail *rediskit.FailOpen

	// nowMs, when not 0, replaces Redis TIME in the scripts (tests only).
	nowMs atomic.Int64
}

// NewCallerIDs returns the caller-ID pools kept in r, each round trip
// bounded by RedisConfig.AdmitOpTimeout. It returns an error naming the
// field that cfg gets wrong.
func NewCallerIDs(r *Redis, cfg CallerIDsConfig) (*CallerIDs, error) {
	if r == nil {
		return nil, errors.New("capacity.NewCallerIDs: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	if cfg.StaleAfter < time.Millisecond {
		return nil, fmt.Errorf("CallerIDsConfig.StaleAfter must be at least 1ms, got %s", cfg.StaleAfter)
	}
	kit := r.kit.Admission()
	return &CallerIDs{kit: kit, cfg: cfg, fail: kit.NewFailOpen()}, nil
}

// Unreachable returns how many acquires and releases found Redis
// unreachable.
func (c *CallerIDs) Unreachable() int64 { return c.fail.Uncounted() }

// CallerID is a number Acquire took for a call.
type CallerID struct {
	Org    string
	Number string
	// Token proves the holder: Release frees the number only with it.
	Token string
	// CallID is the call Acquire took it for.
	CallID string
	// Since is when it was taken (Redis time); it goes stale StaleAfter
	// later.
	Since time.Time
}

// CallerIDState is one number of a pool, as List reports it.
type CallerIDState struct {
	Number string `json:"number"`
	// State is "free", "busy", or "stale" (busy for StaleAfter or longer:
	// the next acquire takes it back).
	State string `json:"state"`
	// BusySince is when a busy or stale number was taken; zero when free.
	BusySince time.Time `json:"busy_since,omitzero"`
	// CallID is the holder's call; "" when free.
	CallID string `json:"call_id,omitempty"`
}

func (c *CallerIDs) keys(org string) []string {
	return []string{c.kit.Key(org, "cid", "pool"), c.kit.Key(org, "cid", "free"), c.kit.Key(org, "cid", "hold"), c.kit.Key(org, "cid", "call")}
}

func (c *CallerIDs) nowArg() string { return rediskit.NowArg(c.nowMs.Load()) }

func checkNumbers(numbers []string) error {
	if len(numbers) == 0 {
		return &NumberError{Field: "numbers", Reason: "is empty: name at least one number"}
	}
	for i, n := range numbers {
		if err := CheckNumber("numbers["+strconv.Itoa(i)+"]", n); err != nil {
			return err
		}
	}
	return nil
}

// Acquire takes a free number of org's pool for callID, first taking back
// the numbers busy for StaleAfter or longer; of the free numbers it takes
// the one freed longest ago (ties: the lowest). It does not wait: with none
// free it returns a *NoCallerIDError (errors.Is ErrNoCallerID) saying how
// many are busy. An invalid org or call id gives an *IDError. When Redis
// cannot be reached (or ctx ends) it returns an error wrapping
// ErrCallerIDsUnavailable at once, after at most RedisConfig.AdmitOpTimeout: the caller
// dials with its default number.
func (c *CallerIDs) Acquire(ctx context.Context, org, callID string) (CallerID, error) {
	if err := CheckID("org", org); err != nil {
		return CallerID{}, err
	}
	if err := CheckID("call_id", callID); err != nil {
		return CallerID{}, err
	}
	token, err := newSlotID()
	if err != nil {
		return CallerID{}, fmt.Errorf("acquiring a caller ID for org %q: %w: %w", org, ErrCallerIDsUnavailable, err)
	}
	octx, cancel := c.kit.Op(ctx)
	defer cancel()
	res, err := callerIDAcquireScript.Run(octx, c.kit.Client, c.keys(org), c.nowArg(), c.cfg.StaleAfter.Milliseconds(), token, callID).Slice()
	if err == nil && len(res) != 5 {
		err = fmt.Errorf("caller-ID acquire script returned %d values, want 5", len(res))
	}
	if err != nil {
		if ctx.Err() == nil {
			c.fail.Note("caller-id acquire", err)
		}
		return CallerID{}, fmt.Errorf("acquiring a caller ID for org %q: %w: %w", org, ErrCallerIDsUnavailable, err)
	}
	number, _ := res[0].(string)
	now, _ := res[1].(int64)
	busy, _ := res[2].(int64)
	total, _ := res[3].(int64)
	if number == "" {
		return CallerID{}, &NoCallerIDError{Org: org, Busy: int(busy), Total: int(total)}
	}
	return CallerID{Org: org, Number: number, Token: token, CallID: callID, Since: time.UnixMilli(now).UTC()}, nil
}

// Release gives number back to org's pool if token still holds it; it is
// idempotent, and a stale holder (whose number was taken back, perhaps
// given to another call, or removed) frees nothing. It reports whether it
// freed the number. Invalid input gives an *IDError or *NumberError. An
// unreachable Redis frees nothing and returns false, nil: the number comes
// back StaleAfter after it was taken.
func (c *CallerIDs) Release(ctx context.Context, org, number, token string) (bool, error) {
	if err := CheckID("org", org); err != nil {
		return false, err
	}
	if err := CheckNumber("number", number); err != nil {
		return false, err
	}
	if err := CheckID("token", token); err != nil {
		return false, err
	}
	octx, cancel := c.kit.Detached(ctx)
	defer cancel()
	n, err := callerIDReleaseScript.Run(octx, c.kit.Client, c.keys(org), c.nowArg(), number, token).Int()
	if err != nil {
		c.fail.Note("caller-id release", err)
		return false, nil
	}
	return n == 1, nil
}

// Add puts numbers into org's pool, free; numbers already there are left
// as they are. It returns how many were new. Every number must pass
// CheckNumber (a *NumberError names the first that does not; nothing is
// added then). Unlike Acquire it returns Redis's error.
func (c *CallerIDs) Add(ctx context.Context, org string, numbers ...string) (int, error) {
	if err := CheckID("org", org); err != nil {
		return 0, err
	}
	if err := checkNumbers(numbers); err != nil {
		return 0, err
	}
	octx, cancel := c.kit.Op(ctx)
	defer cancel()
	args := make([]any, len(numbers))
	for i, n := range numbers {
		args[i] = n
	}
	n, err := callerIDAddScript.Run(octx, c.kit.Client, c.keys(org)[:2], args...).Int()
	if err != nil {
		return 0, fmt.Errorf("adding caller IDs to org %q: %w", org, err)
	}
	return n, nil
}

// Remove takes numbers out of org's pool and returns how many were there.
// Without force it removes nothing when any of them is busy (and not
// stale), returning a *CallerIDBusyError that lists them; with force it
// removes them anyway, and their holders' releases then free nothing.
// Every number must pass CheckNumber. Unlike Acquire it returns Redis's
// error.
func (c *CallerIDs) Remove(ctx context.Context, org string, force bool, numbers ...string) (int, error) {
	if err := CheckID("org", org); err != nil {
		return 0, err
	}
	if err := checkNumbers(numbers); err != nil {
		return 0, err
	}
	octx, cancel := c.kit.Op(ctx)
	defer cancel()
	forceArg := ""
	if force {
		forceArg = "1"
	}
	args := []any{c.nowArg(), c.cfg.StaleAfter.Milliseconds(), forceArg}
	for _, n := range numbers {
		args = append(args, n)
	}
	res, err := callerIDRemoveScript.Run(octx, c.kit.Client, c.keys(org), args...).Slice()
	if err != nil {
		return 0, fmt.Errorf("removing caller IDs from org %q: %w", org, err)
	}
	if len(res) < 1 {
		return 0, fmt.Errorf("removing caller IDs from org %q: script returned nothing", org)
	}
	if ok, _ := res[0].(int64); ok == 0 {
		busy := make([]string, 0, len(res)-1)
		for _, v := range res[1:] {
			s, _ := v.(string)
			busy = append(busy, s)
		}
		return 0, &CallerIDBusyError{Org: org, Numbers: busy}
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("removing caller IDs from org %q: script returned %d values, want 2", org, len(res))
	}
	removed, _ := res[1].(int64)
	return int(removed), nil
}

// List returns every number of org's pool, lowest first, with its state
// in Redis time. Unlike Acquire it returns Redis's error.
func (c *CallerIDs) List(ctx context.Context, org string) ([]CallerIDState, error) {
	if err := CheckID("org", org); err != nil {
		return nil, err
	}
	octx, cancel := c.kit.Op(ctx)
	defer cancel()
	keys := c.keys(org)
	res, err := callerIDListScript.Run(octx, c.kit.Client, []string{keys[0], keys[3]}, c.nowArg()).Slice()
	if err != nil {
		return nil, fmt.Errorf("listing caller IDs of org %q: %w", org, err)
	}
	if len(res) < 1 || (len(res)-1)%3 != 0 {
		return nil, fmt.Errorf("listing caller IDs of org %q: script returned %d values", org, len(res))
	}
	now, _ := res[0].(int64)
	staleMs := c.cfg.StaleAfter.Milliseconds()
	out := make([]CallerIDState, 0, (len(res)-1)/3)
	for i := 1; i < len(res); i += 3 {
		number, _ := res[i].(string)
		scoreStr, _ := res[i+1].(string)
		call, _ := res[i+2].(string)
		score, err := strconv.ParseFloat(scoreStr, 64)
		if err != nil {
			return nil, fmt.Errorf("listing caller IDs of org %q: number %q has score %q: %w", org, number, scoreStr, err)
		}
		st := CallerIDState{Number: number, State: CallerIDFree}
		if since := int64(score); since > 0 {
			st.State, st.BusySince, st.CallID = CallerIDBusy, time.UnixMilli(since).UTC(), call
			if since <= now-staleMs {
				st.State = CallerIDStale
			}
		}
		out = append(out, st)
	}
	return out, nil
}
