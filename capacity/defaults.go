package capacity

import "time"

// Defaults and bounds of capacity's configuration: each default has this
// one owner.
const (
	// KeyPrefixDefault prefixes every Redis key capacity and capacity/live
	// use (RedisConfig.KeyPrefix).
	KeyPrefixDefault = "callscribe:cap"
	// OpTimeoutDefault bounds each Redis round trip of the vendor leases,
	// windows, dial queue and timelines (RedisConfig.OpTimeout).
	OpTimeoutDefault = 250 * time.Millisecond
	// AdmitOpTimeoutDefault bounds each Redis round trip of the call
	// slots, caller IDs and call starts, so that an unreachable Redis
	// delays a call by at most this before capacity fails open
	// (RedisConfig.AdmitOpTimeout).
	AdmitOpTimeoutDefault = time.Second
	// WarnIntervalDefault is how often, at most, a fail-open warning is
	// logged (RedisConfig.WarnInterval).
	WarnIntervalDefault = time.Minute

	// LeaseSTTDefault and LeaseTTSDefault are how long a transcriber and a
	// voice lease live without a refresh (Config).
	LeaseSTTDefault = 90 * time.Second
	LeaseTTSDefault = 60 * time.Second
	// HeartbeatEveryDefault is how often a Heartbeat refreshes the held
	// leases (Config.HeartbeatEvery).
	HeartbeatEveryDefault = 20 * time.Second
	// PeakRetentionDefault is how long per-minute peaks are kept.
	PeakRetentionDefault = 24 * time.Hour
	// LimitEventsCapDefault is how many limit events (and window events,
	// WindowConfig.EventsCap) are kept per provider/kind or scope.
	LimitEventsCapDefault = 100
	// LearnedLimitFloor is the lowest limit a vendor refusal can teach: a
	// learned limit of 0 would stop every stream to that vendor for good,
	// since nothing raises a limit automatically. Only SetLimit goes lower.
	LearnedLimitFloor = 1
	// WarningsKept is how many recent warnings Leases keeps (a bounded
	// list in Redis, shared by every process).
	WarningsKept = 200

	// OrgLimitDefault is an organisation's concurrent-call cap when
	// SlotsConfig names none for it.
	OrgLimitDefault = 10
	// CampaignLimitDefault is a campaign's cap when SlotsConfig names none
	// for it (lowered to the organisation's cap if that is smaller).
	CampaignLimitDefault = 5
	// CampaignLimitMax is the largest campaign cap SlotsConfig (and a
	// stored cap, Slots.SetStoredCaps) accepts.
	CampaignLimitMax = 20
	// OrgLimitMax is the largest organisation cap a stored cap
	// (Slots.SetStoredCaps, capacity/orgcap) accepts.
	OrgLimitMax = 10000
	// StaleAfterDefault is how long a slot (or a busy caller ID) lives
	// before the next acquire reclaims it.
	StaleAfterDefault = 20 * time.Minute
	// SlotSetIdleTTL is how long an organisation's (and a campaign's) slot
	// set stays in Redis after its last slot was taken: an idle
	// organisation's sets expire an hour after its last call started
	// (never before its slots' StaleAfter).
	SlotSetIdleTTL = time.Hour
	// RetryIntervalDefault is Slots.Acquire's retry interval when it is
	// given 0.
	RetryIntervalDefault = 250 * time.Millisecond
	// RetryIntervalMin is Slots.Acquire's shortest retry interval: a
	// smaller one is raised to it, so a waiting call costs Redis at most
	// 20 scripts a second.
	RetryIntervalMin = 50 * time.Millisecond
	// IDMaxLen is the longest organisation, campaign, call or slot id
	// CheckID accepts.
	IDMaxLen = 128
	// CallerIDDigitsMin and CallerIDDigitsMax bound the digits of a caller
	// ID (E.164: a '+', then a country code that does not start with 0, at
	// most 15 digits in all).
	CallerIDDigitsMin = 8
	CallerIDDigitsMax = 15

	// Defaults of WindowConfig's zero fields, and the longest
	// CeilingRetry.
	WindowInitialDefault      = 1
	WindowStartTargetDefault  = 4
	WindowGrowRoundsDefault   = 4
	WindowStrikesDefault      = 3
	WindowCeilingRetryDefault = 5 * time.Second
	WindowCeilingRetryMax     = time.Hour
	WindowImmediateShare      = 0.25
	WindowLeaseDefault        = 90 * time.Second
	WindowHoldDefault         = 250 * time.Millisecond
	WindowMinWaitDefault      = 50 * time.Millisecond
	WindowMaxWaitDefault      = time.Minute
	WindowLateDefault         = 300 * time.Millisecond
	// WindowReleaseLingerDefault is WindowConfig.ReleaseLinger's default.
	WindowReleaseLingerDefault = 5 * time.Millisecond
)
