package status

import "time"

// Snapshot is everything the page shows, read at one moment.
type Snapshot struct {
	// At is when it was read (UTC).
	At time.Time
	// Recordings counts recordings per tenant, lane and state, sorted by
	// tenant then lane.
	Recordings []RecordingCount
	// Cooldowns lists the scopes deferred (or paused) at At.
	Cooldowns []Cooldown
	// Cohorts is each rollout cohort's mode and tenants, sorted.
	Cohorts []Cohort
	// Providers is the capacity per provider/kind, sorted.
	Providers []Provider
	// Outbox is the CRM deliveries at a glance.
	Outbox Outbox
	// Batch is the batch lane's manifests at a glance.
	Batch Batch
	// ReplayRuns are the replay runs still active (enumerating or
	// running), newest first; none when no run is active.
	ReplayRuns []ReplayRun
	// DialQueue is the outbound calls waiting to be dialled, oldest first
	// (the first few); DialQueued counts them all.
	DialQueue  []QueuedCall
	DialQueued int
	// CallEvents are the newest events of live calls' timelines, newest
	// first.
	CallEvents []CallEvent
	// Warnings are recent events an operator should see, newest first.
	Warnings []Warning
	// FailOpen counts the operations that went ahead without Redis since
	// the process started, per part ("leases", "windows", "slots").
	FailOpen []Counter
	// Problems names the sources that could not be read; the rest of the
	// page is still shown.
	Problems []string
}

// RecordingCount is how many of a tenant's recordings in a lane are in a
// state.
type RecordingCount struct {
	Tenant string
	Lane   string
	State  string
	Count  int
}

// Cooldown is one throttling scope's deferral.
type Cooldown struct {
	Scope string
	// Deadline: no new work is admitted before it.
	Deadline time.Time
	// Cause is what set the deadline (the source and reason of the last
	// offer that moved it, with the raw Retry-After when there was one).
	Cause string
	// Paused: an operator must resume the scope; PausedReason says why.
	Paused       bool
	PausedReason string
	// Window is the scope's concurrency window; nil when there is none.
	Window *Window
}

// Cohort is one rollout cohort's deferral mode.
type Cohort struct {
	Cohort string
	// Mode is "observe" or "enforce"; Default: nobody set it, the cohort
	// runs in pipeline.rollout_default.
	Mode    string
	Default bool
	Tenants []string
}

// Window is a scope's concurrency window.
type Window struct {
	Size     int
	InFlight int
	Waiting  int
	Phase    string
}

// Provider is one provider/kind's capacity.
type Provider struct {
	Provider string
	Kind     string
	InUse    int
	// ConfiguredLimit is capacity.limits'; EffectiveLimit is the one in
	// force (learned from a vendor's refusal when Learned).
	ConfiguredLimit int
	EffectiveLimit  int
	Learned         bool
	// Peaks is the most leases held at once per minute, oldest first.
	Peaks []MinutePeak
}

// MinutePeak is the most leases held at once during one minute.
type MinutePeak struct {
	Minute time.Time
	Peak   int
}

// Outbox is the CRM deliveries at a glance.
type Outbox struct {
	Pending   int64
	OldestAge time.Duration
	Delivered int64
	Dead      int64
	// RecentDead are the newest dead deliveries (at most a few).
	RecentDead []DeadDelivery
}

// Batch is the batch lane's manifests: how many are in flight (formed,
// submitted or accepted) and done, their items, and the newest few.
type Batch struct {
	InFlight, Done, Unbatched int64
	// ItemsInFlight is the items of the manifests in flight.
	ItemsInFlight int64
	// Recent are the newest manifests, newest first.
	Recent []Manifest
}

// Manifest is one batch manifest.
type Manifest struct {
	Key, Tenant, State, VendorBatchID string
	Items                             int
	Resubmission                      bool
	Created                           time.Time
}

// ReplayRun is an active replay run's progress: its figures as its report
// counts them (outbox.ReplayRun).
type ReplayRun struct {
	ID     int64
	Target string
	// State: enumerating or running.
	State     string
	StartedBy string
	Started   time.Time
	// Replayed of Enumerated: recordings re-driven of those enqueued so
	// far.
	Replayed, Enumerated int64
	// Settled of Deliveries: deliveries no longer pending of the run's
	// action sets.
	Settled, Deliveries int64
	// CRMEffectsCreated: applied now (201); AnsweredAsReplays: the target
	// already held them (200).
	CRMEffectsCreated, AnsweredAsReplays int64
	// Throttled and Transient answers put a delivery back in line; Dead
	// deliveries ended unsent or refused.
	Throttled, Transient, Dead int64
	// SentInsideKnownCooldown: sends inside a deferral of the target's
	// scope known when they were admitted; must be 0.
	SentInsideKnownCooldown int64
}

// DeadDelivery is one delivery given up on.
type DeadDelivery struct {
	ID      int64
	Tenant  string
	CallID  string
	Target  string
	Class   string
	Updated time.Time
}

// Warning is one event an operator should see.
type Warning struct {
	At time.Time
	// Kind: "learned-limit" (a vendor refused below the limit and it was
	// lowered), "over-limit-connect" (a live call connected with every
	// transcriber full), "cooldown" or "overload" (a scope's window),
	// "fail-open".
	Kind    string
	Subject string
	Detail  string
}

// Counter is a named count.
type Counter struct {
	Name  string
	Value int64
}

// QueuedCall is an outbound call waiting to be dialled.
type QueuedCall struct {
	CallID     string
	Agent      string
	QueuedAt   time.Time
	WaitingFor string
	Position   int
}

// CallEvent is one event of a live call's timeline (an over-limit
// connection, a fallback, a voice overflow or wait, a dial step).
type CallEvent struct {
	At       time.Time
	CallID   string
	Kind     string
	Provider string
	Detail   string
}
