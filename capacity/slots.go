package capacity

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// NoSlotError says which cap was full when Acquire gave up. errors.Is(err,
// ErrNoSlot) is true for it.
type NoSlotError struct {
	Org      string
	Campaign string // "" when the call has no campaign
	// OrgInUse and CampaignInUse are the live slots Redis counted on the
	// last attempt; CampaignInUse and CampaignLimit are 0 without a campaign.
	OrgInUse      int
	OrgLimit      int
	CampaignInUse int
	CampaignLimit int
}

func (e *NoSlotError) Error() string {
	if e.Campaign == "" {
		return fmt.Sprintf("capacity: no call slot free for org %q: %d/%d in use", e.Org, e.OrgInUse, e.OrgLimit)
	}
	return fmt.Sprintf("capacity: no call slot free for org %q (%d/%d in use), campaign %q (%d/%d in use)",
		e.Org, e.OrgInUse, e.OrgLimit, e.Campaign, e.CampaignInUse, e.CampaignLimit)
}

// Is reports whether target is ErrNoSlot.
func (e *NoSlotError) Is(target error) bool { return target == ErrNoSlot }

// OrgSlots configures one organisation's caps.
type OrgSlots struct {
	// Limit is the organisation's concurrent-call cap.
	// Default 0: SlotsConfig.OrgLimit.
	Limit int
	// Campaigns maps a campaign to its cap: 1–CampaignLimitMax and never
	// above the organisation's cap. A campaign not listed gets
	// SlotsConfig.CampaignLimit, lowered to the organisation's cap.
	Campaigns map[string]int
}

// SlotsConfig configures NewSlots.
type SlotsConfig struct {
	// OrgLimit is the cap of an organisation not listed in Orgs.
	// Default 0: OrgLimitDefault (10).
	OrgLimit int
	// CampaignLimit is the cap of a campaign not listed in its
	// organisation's OrgSlots.Campaigns, 1–CampaignLimitMax.
	// Default 0: CampaignLimitDefault (5).
	CampaignLimit int
	// Orgs holds per-organisation caps. Default nil: every organisation
	// gets OrgLimit and CampaignLimit.
	Orgs map[string]OrgSlots
	// StaleAfter is how long a slot (and its call binding) lives; the next
	// acquire for the organisation reclaims older ones.
	// Default 0: StaleAfterDefault (20m).
	StaleAfter time.Duration
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c SlotsConfig) WithDefaults() SlotsConfig {
	c.OrgLimit = cmp.Or(c.OrgLimit, OrgLimitDefault)
	c.CampaignLimit = cmp.Or(c.CampaignLimit, CampaignLimitDefault)
	c.StaleAfter = cmp.Or(c.StaleAfter, StaleAfterDefault)
	return c
}

func (c SlotsConfig) validate() error {
	if c.OrgLimit < 1 {
		return fmt.Errorf("SlotsConfig.OrgLimit must be at least 1, got %d", c.OrgLimit)
	}
	if c.CampaignLimit < 1 || c.CampaignLimit > CampaignLimitMax {
		return fmt.Errorf("SlotsConfig.CampaignLimit must be 1–%d, got %d", CampaignLimitMax, c.CampaignLimit)
	}
	if c.StaleAfter < time.Millisecond {
		return fmt.Errorf("SlotsConfig.StaleAfter must be at least 1ms, got %s", c.StaleAfter)
	}
	orgs := make([]string, 0, len(c.Orgs))
	for org := range c.Orgs {
		orgs = append(orgs, org)
	}
	sort.Strings(orgs)
	for _, org := range orgs {
		o := c.Orgs[org]
		if err := CheckID("org", org); err != nil {
			return fmt.Errorf("SlotsConfig.Orgs[%.*q]: %w", IDMaxLen, org, err)
		}
		limit := o.Limit
		if limit == 0 {
			limit = c.OrgLimit
		}
		if limit < 1 {
			return fmt.Errorf("SlotsConfig.Orgs[%q].Limit must be at least 1, got %d", org, o.Limit)
		}
		camps := make([]string, 0, len(o.Campaigns))
		for camp := range o.Campaigns {
			camps = append(camps, camp)
		}
		sort.Strings(camps)
		for _, camp := range camps {
			n := o.Campaigns[camp]
			if err := CheckID("campaign", camp); err != nil {
				return fmt.Errorf("SlotsConfig.Orgs[%q].Campaigns[%.*q]: %w", org, IDMaxLen, camp, err)
			}
			if n < 1 || n > CampaignLimitMax {
				return fmt.Errorf("SlotsConfig.Orgs[%q].Campaigns[%q] must be 1–%d, got %d", org, camp, CampaignLimitMax, n)
			}
			if n > limit {
				return fmt.Errorf("SlotsConfig.Orgs[%q].Campaigns[%q] = %d is above org %q's cap %d", org, camp, n, org, limit)
			}
		}
	}
	return nil
}

// Slots counts live calls per organisation and campaign in Redis. It is
// safe for concurrent use.
type Slots struct {
	kit  rediskit.Kit
	cfg  SlotsConfig
	fail *rediskit.FailOpen
	// caps is what Limits reads: cfg.Orgs with the caps SetStoredCaps was
	// last given laid over them, swapped whole, never changed in place.
	caps atomic.Pointer[map[string]OrgSlots]

	// nowMs, when not 0, replaces Redis TIME in the scripts (tests only).
	nowMs atomic.Int64
}

// NewSlots returns Slots counting in r, each round trip bounded by
// RedisConfig.AdmitOpTimeout. It returns an error naming the field (and the
// organisation or campaign) that cfg gets wrong.
func NewSlots(r *Redis, cfg SlotsConfig) (*Slots, error) {
	if r == nil {
		return nil, errors.New("capacity.NewSlots: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kit := r.kit.Admission()
	s := &Slots{kit: kit, cfg: cfg, fail: kit.NewFailOpen()}
	orgs := cfg.Orgs
	s.caps.Store(&orgs)
	return s, nil
}

// Limits returns the caps Acquire applies to org and campaign; the
// campaign cap is 0 when campaign is "". A campaign's cap is never above
// its organisation's: a configured one that a stored organisation cap went
// below is lowered to it, as an unlisted campaign's is.
func (s *Slots) Limits(org, campaign string) (orgLimit, campaignLimit int) {
	o := (*s.caps.Load())[org]
	orgLimit = o.Limit
	if orgLimit == 0 {
		orgLimit = s.cfg.OrgLimit
	}
	if campaign == "" {
		return orgLimit, 0
	}
	campaignLimit, ok := o.Campaigns[campaign]
	if !ok {
		campaignLimit = s.cfg.CampaignLimit
	}
	return orgLimit, min(campaignLimit, orgLimit)
}

// SetStoredCaps lays caps stored at run time (capacity/orgcap) over the
// configured ones (SlotsConfig.Orgs), replacing what an earlier call laid:
// an organisation's Limit, when not 0, replaces its configured cap, and
// each campaign listed replaces that campaign's; what caps does not name
// keeps its configured cap. The swap is atomic: an Acquire sees the caps
// before or after it, never a mix. Organisation caps must be 0 or
// 1–OrgLimitMax, campaign caps 1–CampaignLimitMax, ids valid (CheckID);
// otherwise it returns an error naming the first bad entry and changes
// nothing. It never touches Redis.
func (s *Slots) SetStoredCaps(caps map[string]OrgSlots) error {
	for _, org := range slices.Sorted(maps.Keys(caps)) {
		o := caps[org]
		if err := CheckID("org", org); err != nil {
			return fmt.Errorf("stored caps[%.*q]: %w", IDMaxLen, org, err)
		}
		if o.Limit < 0 || o.Limit > OrgLimitMax {
			return fmt.Errorf("stored caps[%q].Limit must be 0 or 1–%d, got %d", org, OrgLimitMax, o.Limit)
		}
		for _, camp := range slices.Sorted(maps.Keys(o.Campaigns)) {
			if err := CheckID("campaign", camp); err != nil {
				return fmt.Errorf("stored caps[%q].Campaigns[%.*q]: %w", org, IDMaxLen, camp, err)
			}
			if n := o.Campaigns[camp]; n < 1 || n > CampaignLimitMax {
				return fmt.Errorf("stored caps[%q].Campaigns[%q] must be 1–%d, got %d", org, camp, CampaignLimitMax, n)
			}
		}
	}
	merged := make(map[string]OrgSlots, len(s.cfg.Orgs)+len(caps))
	maps.Copy(merged, s.cfg.Orgs)
	for org, o := range caps {
		m := merged[org]
		if o.Limit != 0 {
			m.Limit = o.Limit
		}
		if len(o.Campaigns) > 0 {
			camps := maps.Clone(m.Campaigns)
			if camps == nil {
				camps = make(map[string]int, len(o.Campaigns))
			}
			maps.Copy(camps, o.Campaigns)
			m.Campaigns = camps
		}
		merged[org] = m
	}
	s.caps.Store(&merged)
	return nil
}

// Uncounted returns how many operations went ahead without Redis.
func (s *Slots) Uncounted() int64 { return s.fail.Uncounted() }

// Slot is one call slot taken by Acquire.
type Slot struct {
	Org      string
	Campaign string
	// ID names the slot in Redis; "" when Uncounted.
	ID string
	// Uncounted is true when Redis was unreachable and Acquire granted the
	// slot without counting it (fail open). Bind and Release do nothing.
	Uncounted bool

	expMs int64 // expiry in Redis time, milliseconds; 0 when restored
	s     *Slots
}

// Expires is when the slot goes stale (Redis time) as Acquire granted it;
// the zero Time for an uncounted or restored slot.
func (sl Slot) Expires() time.Time {
	if sl.expMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(sl.expMs)
}

// Restore rebuilds a slot of s that a holder outside this process sends
// back (the HTTP API's clients), so that it can be bound or released: org,
// campaign and id as Acquire granted them. Nothing the holder says is
// trusted: Bind binds only a slot Redis holds live for org (and campaign),
// for as long as Redis says it lives. An uncounted slot keeps only org and
// campaign.
func (s *Slots) Restore(org, campaign, id string, uncounted bool) Slot {
	if uncounted {
		return Slot{Org: org, Campaign: campaign, Uncounted: true, s: s}
	}
	return Slot{Org: org, Campaign: campaign, ID: id, s: s}
}

const (
	registryKeyTag = "registry"
	orgSetPart     = "slots"
	campSetPart    = "camp"
	callPart       = "call"
)

func (s *Slots) orgKey(org string) string            { return s.kit.Key(org, orgSetPart) }
func (s *Slots) campKey(org, campaign string) string { return s.kit.Key(org, campSetPart, campaign) }
func (s *Slots) callKey(org, callID string) string   { return s.kit.Key(org, callPart, callID) }
func (s *Slots) registryKey() string                 { return s.kit.Key(registryKeyTag, "orgs") }
func (s *Slots) nowArg() string                      { return rediskit.NowArg(s.nowMs.Load()) }

// slotAcquireScript: KEYS org set, campaign set; ARGV now, org limit,
// campaign limit (0: none), stale ms, slot ID, idle ms. Trims expired
// members, counts, and adds the slot to both sets (scored by expiry) only
// when both have room; each set then lives idle ms (at least stale ms)
// after its newest slot. Returns {granted, org in use, campaign in use,
// expiry ms}.
var slotAcquireScript = rediskit.NowScript(`
local orgLimit, campLimit, stale = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local orgN = redis.call('ZCARD', KEYS[1])
local campN = 0
if campLimit > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  campN = redis.call('ZCARD', KEYS[2])
end
if orgN >= orgLimit or (campLimit > 0 and campN >= campLimit) then
  return {0, orgN, campN, 0}
end
local exp = now + stale
local idle = math.max(tonumber(ARGV[6]), stale)
redis.call('ZADD', KEYS[1], exp, ARGV[5])
redis.call('PEXPIRE', KEYS[1], idle)
if campLimit > 0 then
  redis.call('ZADD', KEYS[2], exp, ARGV[5])
  redis.call('PEXPIRE', KEYS[2], idle)
  campN = campN + 1
end
return {1, orgN + 1, campN, exp}
`)

// slotReleaseScript: KEYS org set, campaign set; ARGV slot ID.
var slotReleaseScript = redis.NewScript(`
return redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
`)

// slotBindScript: KEYS binding, org set, campaign set (all of one
// organisation); ARGV now, campaign ("" for none), slot ID. Refuses (-1)
// unless the slot is a live member of the org set (and of the campaign
// set); refuses (0) when the binding holds another slot still live in the
// org set; otherwise (re)writes the binding with the slot's expiry as Redis
// scored it, and a TTL that ends with the slot (1).
var slotBindScript = rediskit.NowScript(`
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]))
if not exp or exp <= now then return -1 end
if ARGV[2] ~= '' then
  local ce = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[3]))
  if not ce or ce <= now then return -1 end
end
local id = redis.call('HGET', KEYS[1], 'id')
if id and id ~= ARGV[3] then
  local e = tonumber(redis.call('ZSCORE', KEYS[2], id))
  if e and e > now then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'campaign', ARGV[2], 'id', ARGV[3], 'exp', exp)
redis.call('PEXPIRE', KEYS[1], math.max(exp - now, 1))
return 1
`)

// slotBindingScript: KEYS binding; ARGV now. Returns {slot ID, campaign}
// of a binding whose slot has not expired, or {} (and drops a stale one).
var slotBindingScript = rediskit.NowScript(`
local b = redis.call('HMGET', KEYS[1], 'id', 'campaign', 'exp')
if not b[1] then return {} end
local e = tonumber(b[3])
if not e or e <= now then
  redis.call('DEL', KEYS[1])
  return {}
end
return {b[1], b[2] or ''}
`)

// slotUnbindScript: KEYS binding; ARGV slot ID. Deletes the binding if it
// still holds that slot.
var slotUnbindScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// slotLiveScript: KEYS org set; ARGV now. Counts slots not yet expired.
var slotLiveScript = rediskit.NowScript(`
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`)

// Acquire takes a slot for a call of org in campaign ("" for none): granted
// only when both the organisation and the campaign have room, in one
// script. With timeout 0 it tries once; otherwise it retries every
// retryInterval (0: RetryIntervalDefault; below RetryIntervalMin: raised to
// it) until timeout has passed. When the caps stay full it returns a
// *NoSlotError (errors.Is ErrNoSlot); when ctx ends first, ctx's error; when
// org or campaign is not a valid id (CheckID), an *IDError. When Redis
// cannot be reached it grants an uncounted slot (fail open) and returns no
// error.
func (s *Slots) Acquire(ctx context.Context, org, campaign string, timeout, retryInterval time.Duration) (Slot, error) {
	if err := checkOrgCampaign(org, campaign); err != nil {
		return Slot{}, err
	}
	if retryInterval <= 0 {
		retryInterval = RetryIntervalDefault
	}
	retryInterval = max(retryInterval, RetryIntervalMin)
	orgLimit, campLimit := s.Limits(org, campaign)
	id, err := newSlotID()
	if err != nil {
		s.fail.Note("slot acquire", err)
		return Slot{Org: org, Campaign: campaign, Uncounted: true, s: s}, nil
	}
	deadline := time.Now().Add(timeout)
	var timer *time.Timer
	for {
		if err := ctx.Err(); err != nil {
			return Slot{}, fmt.Errorf("acquiring call slot for org %q: %w", org, err)
		}
		res, err := s.tryAcquire(ctx, org, campaign, id, orgLimit, campLimit)
		if err != nil {
			if ctx.Err() != nil {
				return Slot{}, fmt.Errorf("acquiring call slot for org %q: %w", org, ctx.Err())
			}
			s.fail.Note("slot acquire", err)
			return Slot{Org: org, Campaign: campaign, Uncounted: true, s: s}, nil
		}
		if res[0] == 1 {
			s.register(ctx, org)
			return Slot{Org: org, Campaign: campaign, ID: id, expMs: res[3], s: s}, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return Slot{}, &NoSlotError{Org: org, Campaign: campaign, OrgInUse: int(res[1]), OrgLimit: orgLimit,
				CampaignInUse: int(res[2]), CampaignLimit: campLimit}
		}
		wait = min(wait, retryInterval)
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return Slot{}, fmt.Errorf("acquiring call slot for org %q: %w", org, ctx.Err())
		case <-timer.C:
		}
	}
}

func (s *Slots) tryAcquire(ctx context.Context, org, campaign, id string, orgLimit, campLimit int) ([]int64, error) {
	ctx, cancel := s.kit.Op(ctx)
	defer cancel()
	keys := []string{s.orgKey(org), s.campKey(org, campaign)}
	res, err := slotAcquireScript.Run(ctx, s.kit.Client, keys, s.nowArg(), orgLimit, campLimit, s.cfg.StaleAfter.Milliseconds(), id, SlotSetIdleTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("slot acquire script returned %d values, want 4", len(res))
	}
	return res, nil
}

// register adds org to the registry set LiveCalls sums over. It runs on
// every grant (one SADD), so a registry lost in Redis fills up again; an
// error is ignored, since the next grant retries and LiveCalls is only
// observability.
func (s *Slots) register(ctx context.Context, org string) {
	ctx, cancel := s.kit.Detached(ctx)
	defer cancel()
	_ = s.kit.Client.SAdd(ctx, s.registryKey(), org).Err()
}

// Bind attaches the slot to callID within the slot's organisation, so that
// ReleaseCall(org, callID) frees it. Bindings of different organisations
// never meet, even under the same call id. The slot must be live in Redis
// for its organisation (and campaign), else Bind returns ErrSlotNotHeld; the
// binding lives as long as Redis says the slot does. If callID is already
// bound to another live slot, Bind releases this slot and returns
// ErrAlreadyBound. Binding the same slot again is a no-op. An invalid call
// id, organisation, campaign or slot id gives an *IDError. An uncounted
// slot, or an unreachable Redis, binds nothing (fail open).
func (sl Slot) Bind(ctx context.Context, callID string) error {
	if sl.Uncounted || sl.s == nil {
		return nil
	}
	if err := sl.check(); err != nil {
		return err
	}
	if err := CheckID("call_id", callID); err != nil {
		return err
	}
	s := sl.s
	octx, cancel := s.kit.Detached(ctx)
	defer cancel()
	keys := []string{s.callKey(sl.Org, callID), s.orgKey(sl.Org), s.campKey(sl.Org, sl.Campaign)}
	ok, err := slotBindScript.Run(octx, s.kit.Client, keys, s.nowArg(), sl.Campaign, sl.ID).Int()
	if err != nil {
		s.fail.Note("slot bind", err)
		return nil
	}
	if ok == -1 {
		return fmt.Errorf("binding call %q to slot %q of org %q: %w", callID, sl.ID, sl.Org, ErrSlotNotHeld)
	}
	if ok == 0 {
		_ = sl.Release(ctx)
		return fmt.Errorf("binding call %q to a slot of org %q: %w", callID, sl.Org, ErrAlreadyBound)
	}
	return nil
}

// Release frees a slot that was never bound (say, the dial failed). It is
// idempotent; an uncounted slot, or an unreachable Redis, frees nothing
// and returns nil (the slot goes stale). A restored slot with an invalid
// organisation, campaign or id gives an *IDError.
func (sl Slot) Release(ctx context.Context) error {
	if sl.Uncounted || sl.s == nil {
		return nil
	}
	if err := sl.check(); err != nil {
		return err
	}
	sl.s.release(ctx, sl.Org, sl.Campaign, sl.ID)
	return nil
}

func (sl Slot) check() error {
	if err := checkOrgCampaign(sl.Org, sl.Campaign); err != nil {
		return err
	}
	return CheckID("slot.id", sl.ID)
}

func (s *Slots) release(ctx context.Context, org, campaign, id string) bool {
	ctx, cancel := s.kit.Detached(ctx)
	defer cancel()
	if err := slotReleaseScript.Run(ctx, s.kit.Client, []string{s.orgKey(org), s.campKey(org, campaign)}, id).Err(); err != nil {
		s.fail.Note("slot release", err)
		return false
	}
	return true
}

// ReleaseCall frees the slot that org bound to callID, in both the
// organisation and the campaign, and removes the binding. It touches only
// org's bindings: when org has none for callID (never bound, released
// already, stale, or another organisation's call) it frees nothing and
// returns ErrNotBound, which a caller that only wants the slot gone may
// ignore. An invalid org or call id gives an *IDError. An unreachable Redis
// frees nothing and returns nil (the slot goes stale).
func (s *Slots) ReleaseCall(ctx context.Context, org, callID string) error {
	if err := CheckID("org", org); err != nil {
		return err
	}
	if err := CheckID("call_id", callID); err != nil {
		return err
	}
	octx, cancel := s.kit.Detached(ctx)
	defer cancel()
	key := s.callKey(org, callID)
	b, err := slotBindingScript.Run(octx, s.kit.Client, []string{key}, s.nowArg()).StringSlice()
	if err != nil {
		s.fail.Note("slot release call", err)
		return nil
	}
	if len(b) != 2 {
		return fmt.Errorf("releasing call %q of org %q: %w", callID, org, ErrNotBound)
	}
	id, campaign := b[0], b[1]
	if !s.release(ctx, org, campaign, id) {
		return nil
	}
	if err := slotUnbindScript.Run(octx, s.kit.Client, []string{key}, id).Err(); err != nil {
		s.fail.Note("slot release call", err)
	}
	return nil
}

// LiveCalls returns the number of live (not stale) slots over every
// organisation that ever took one: a fleet-wide gauge for observability.
// Unlike the rest of Slots it returns Redis's error.
func (s *Slots) LiveCalls(ctx context.Context) (int, error) {
	octx, cancel := s.kit.Op(ctx)
	defer cancel()
	orgs, err := s.kit.Client.SMembers(octx, s.registryKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("listing organisations for live calls: %w", err)
	}
	total := 0
	for _, org := range orgs {
		n, err := slotLiveScript.Run(octx, s.kit.Client, []string{s.orgKey(org)}, s.nowArg()).Int()
		if err != nil {
			return 0, fmt.Errorf("counting live calls of org %q: %w", org, err)
		}
		total += n
	}
	return total, nil
}

// OrgLiveCalls returns the number of org's live (not stale) slots: what
// an organisation may see of the fleet's calls. Like LiveCalls it returns
// Redis's error (and an *IDError for an org id CheckID refuses).
func (s *Slots) OrgLiveCalls(ctx context.Context, org string) (int, error) {
	if err := CheckID("org", org); err != nil {
		return 0, err
	}
	octx, cancel := s.kit.Op(ctx)
	defer cancel()
	n, err := slotLiveScript.Run(octx, s.kit.Client, []string{s.orgKey(org)}, s.nowArg()).Int()
	if err != nil {
		return 0, fmt.Errorf("counting live calls of org %q: %w", org, err)
	}
	return n, nil
}

func newSlotID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making slot ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
