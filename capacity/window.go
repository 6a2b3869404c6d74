package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// Outcome is what the vendor's answer to a windowed request said, for the
// window to adapt.
type Outcome int

const (
	// Neutral: no signal (a transient failure, a cancelled request).
	Neutral Outcome = iota
	// Success: the vendor took the request (any real answer, even a
	// permanent refusal of the content).
	Success
	// Overload: the vendor refused for load (429, 503) without saying
	// why: it may be random throttling, so only Strikes of them in a row
	// shrink the window.
	Overload
	// Refused: the vendor said its concurrency limit was reached ("too
	// many concurrent requests"): the window shrinks to the in-flight
	// count minus one at once.
	Refused
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Overload:
		return "overload"
	case Refused:
		return "concurrency refusal"
	}
	return "neutral"
}

// WindowConfig configures NewWindows.
type WindowConfig struct {
	// Initial is a new scope's window. Default WindowInitialDefault (1).
	Initial int
	// StartTarget is where a new scope's slow start stops when the
	// request names no plan limit (with one, it goes to the plan limit).
	// Default WindowStartTargetDefault (4).
	StartTarget int
	// GrowRounds is how many full windows of successes (counted while the
	// window is full, since it last grew or shrank) it waits before it
	// grows by one above the size it had.
	// Default WindowGrowRoundsDefault (4).
	GrowRounds int
	// Strikes is how many overload answers that do not say why (a plain
	// 429 or 503), in a row with no success at their level between,
	// shrink the window (a single one is taken for random throttling).
	// Default WindowStrikesDefault (3).
	Strikes int
	// CeilingRetry is how long a size that drew an overload is not tried
	// again; it doubles each time the same size draws one again, up to
	// WindowCeilingRetryMax. Default WindowCeilingRetryDefault (5s).
	CeilingRetry time.Duration
	// ImmediateShare is the share of the window batch work may not take,
	// kept for the immediate lane (rounded up; at least one slot is left
	// to batch work). Default 0: WindowImmediateShare (0.25); negative:
	// none kept.
	ImmediateShare float64
	// Lease is how long a slot lives without an answer (a crashed worker's
	// slot lapses after it). Default WindowLeaseDefault (90s).
	Lease time.Duration
	// Hold is the first estimate of how long a slot is held, which sizes
	// the waits. Default WindowHoldDefault (250ms).
	Hold time.Duration
	// MinWait and MaxWait bound how long a refused request waits before
	// asking again. Defaults WindowMinWaitDefault, WindowMaxWaitDefault.
	MinWait, MaxWait time.Duration
	// Late is how early a waiter may ask, and an eighth of how late, and
	// still count as present (ahead of later waiters). Default
	// WindowLateDefault (300ms): a River job wakes within its fetch poll.
	Late time.Duration
	// EventsCap is how many window events are kept per scope. Default
	// LimitEventsCapDefault.
	EventsCap int
	// ReleaseLinger is how long a release that says nothing against the
	// window (Success, Neutral) given to ReleaseLater may wait in its
	// process for the next Acquire of its scope, which gives it back in
	// the same script: one round trip to Redis instead of two. Past it,
	// the scope's waiting releases go in one script of their own. Default
	// WindowReleaseLingerDefault (5ms); negative: every release is sent
	// at once.
	ReleaseLinger time.Duration
	testNow       func() int64
	// testGather, when set (tests only), is called with each batch of
	// acquires before it is sent.
	testGather func(batch []WindowRequest)
}

// WithDefaults returns c with each zero field set to its default.
func (c WindowConfig) WithDefaults() WindowConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Initial, WindowInitialDefault)
	def(&c.StartTarget, WindowStartTargetDefault)
	def(&c.GrowRounds, WindowGrowRoundsDefault)
	def(&c.Strikes, WindowStrikesDefault)
	def(&c.EventsCap, LimitEventsCapDefault)
	defd(&c.CeilingRetry, WindowCeilingRetryDefault)
	defd(&c.Lease, WindowLeaseDefault)
	defd(&c.Hold, WindowHoldDefault)
	defd(&c.MinWait, WindowMinWaitDefault)
	defd(&c.MaxWait, WindowMaxWaitDefault)
	defd(&c.Late, WindowLateDefault)
	if c.ReleaseLinger == 0 {
		c.ReleaseLinger = WindowReleaseLingerDefault
	}
	if c.ImmediateShare == 0 {
		c.ImmediateShare = WindowImmediateShare
	}
	return c
}

// Windows keeps one adaptive concurrency window per throttling scope in
// Redis, shared by every process: how many requests of the scope may be
// in flight at once, who waits for a slot and in which order.
//
// The window adapts to the vendor's answers. It opens at Initial and grows
// by slow start (one more slot per success, so it doubles per round) to
// the plan limit or StartTarget. A concurrency refusal with n in flight
// (above one: a single request cannot be over a concurrency limit)
// shrinks it to n − 1 at once, and n is not tried again for CeilingRetry
// (doubling while it keeps failing; a success at n clears it). An
// overload that does not say why (a plain 429 or 503) may be random
// throttling: Strikes of them in a row, with no success at that level
// between, shrink it the same way. Above
// the size it had, it grows by one only after GrowRounds full windows of
// successes. A cooldown (Cooldown) restarts it from the single probe, and
// it grows back by slow start to the size it had. Never above the plan
// limit of the request.
//
// Waiters are ordered immediate lane first, then by deadline; a free slot
// goes to the first waiter present. A refused request is told how long to
// wait from its place in the queue and the measured hold time, and when a
// slot frees, the first waiters asleep are called (their River jobs are
// returned to be woken), so waiters wake in order, one per free slot,
// rather than all at once or by polling.
//
// Like Leases, Windows fails open: when Redis is unreachable a request is
// granted uncounted.
type Windows struct {
	cfg  WindowConfig
	kit  rediskit.Kit
	fail *rediskit.FailOpen
	args string
	// registered: scope → when this process last added it to the
	// registry of windows (Scopes), so that an acquire pays that round
	// trip at most once per windowRegisterEvery and scope.
	registered sync.Map

	mu sync.Mutex
	// queued: scope → the releases waiting for its next acquire
	// (ReleaseLater).
	queued map[string]*releaseQueue
	// gathering: the scopes (and plan limits) with an acquire on its way
	// to Redis from this process, and the acquires waiting to go next.
	gathering map[gatherKey]*acquireGather
}

// windowRegisterEvery is how often a process adds a scope it acquires in
// to the registry of windows again: the registry is only ever added to,
// so once is enough while Redis keeps it; a Redis that lost it (restarted
// with nothing on disk, flushed) lists the scope again within this long
// of its next acquire.
const windowRegisterEvery = time.Minute

// NewWindows returns Windows kept in r for cfg after filling defaults.
func NewWindows(r *Redis, cfg WindowConfig) (*Windows, error) {
	if r == nil {
		return nil, errors.New("capacity.NewWindows: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	if cfg.ImmediateShare >= 1 {
		return nil, fmt.Errorf("capacity: WindowConfig.ImmediateShare is %v, want below 1", cfg.ImmediateShare)
	}
	share := 0
	if cfg.ImmediateShare > 0 {
		share = int(math.Round(cfg.ImmediateShare * 1000))
	}
	args, err := json.Marshal(map[string]any{
		"initial": cfg.Initial, "start": cfg.StartTarget, "rounds": cfg.GrowRounds, "strikes": cfg.Strikes,
		"retry": cfg.CeilingRetry.Milliseconds(), "retry_max": WindowCeilingRetryMax.Milliseconds(), "share": share,
		"lease": cfg.Lease.Milliseconds(), "hold": cfg.Hold.Milliseconds(), "min_wait": cfg.MinWait.Milliseconds(),
		"max_wait": cfg.MaxWait.Milliseconds(), "events": cfg.EventsCap, "late": cfg.Late.Milliseconds(),
	})
	if err != nil {
		return nil, err
	}
	return &Windows{cfg: cfg, kit: r.kit, fail: r.kit.NewFailOpen(), args: string(args), queued: map[string]*releaseQueue{},
		gathering: map[gatherKey]*acquireGather{}}, nil
}

// WindowRequest asks for a slot of a scope's window.
type WindowRequest struct {
	Scope string
	// Holder identifies the request's work (a recording id): a holder
	// already in flight is granted again, so a retried step does not take
	// two slots.
	Holder string
	// Lane: lane.Batch may use the window minus the share kept for the
	// immediate lane (at least one slot), and waits behind every other
	// lane; any other lane (lane.Immediate) may use the whole window.
	Lane Lane
	// Deadline orders waiters of one lane: earliest first. Zero: last.
	Deadline time.Time
	// NotBefore: the scope is deferred until then (or a probe is out); the
	// holder only takes its place in the queue and is told when to come
	// back, never granted a slot, even when Redis's clock is already past
	// NotBefore. A holder already in flight is granted again, as ever.
	NotBefore time.Time
	// Probe: the request is the scope's single probe after a cooldown; it
	// is granted whatever the window.
	Probe bool
	// Max is the plan limit (0: none): the window never grows above it.
	Max int
	// JobID is the River job that will ask again (0: none): when a slot
	// frees while it sleeps in line, the releaser is told to wake it.
	JobID int64
}

// WindowGrant is Acquire's answer.
type WindowGrant struct {
	Granted bool
	// InFlight is how many slots of the scope are held, this one included
	// when granted.
	InFlight int
	// Size is the window.
	Size int
	// Rank is the holder's place among the waiters (0 first) when refused.
	Rank int
	// Wait is how long to wait before asking again when refused.
	Wait time.Duration
	// Target is the size the window is growing towards (after a
	// cooldown: the size it had).
	Target int
	// Uncounted: granted without Redis (fail open).
	Uncounted bool
	// Wake are River jobs of waiters called to the slots this grant left
	// free: the caller makes them available now.
	Wake []int64
}

func (w *Windows) keys(scope string) []string {
	tag := "win/" + scope
	k := func(part string) string { return w.kit.Key(tag, part) }
	return []string{k("state"), k("inflight"), k("meta"), k("wait"), k("due"), k("wexp"), k("events"), k("wjob"), k("duei")}
}

func (w *Windows) registryKey() string { return w.kit.Key("win", "scopes") }

func (w *Windows) nowArg() string {
	if w.cfg.testNow != nil {
		return rediskit.NowArg(w.cfg.testNow())
	}
	return ""
}

// laneArg is a lane as the window scripts know it: 1 batch, 0 any other.
func laneArg(l Lane) int {
	if l.IsBatch() {
		return 1
	}
	return 0
}

// orderScore sorts immediate before batch, then by deadline (none last).
func orderScore(l Lane, deadline time.Time) int64 {
	const span = int64(1e13) // beyond any Unix millisecond of this era
	d := span - 1
	if !deadline.IsZero() {
		d = min(max(deadline.UnixMilli(), 0), span-1)
	}
	return int64(laneArg(l))*span + d
}

// Acquire asks for a slot of req.Scope's window. It never fails: when
// Redis cannot be reached it grants uncounted.
//
// The scope's releases waiting in this process (ReleaseLater) go first,
// in the same script. Acquires of one scope that arrive while another is
// on its way to Redis from this process go together in the next script,
// each answered as if it had run alone (acquire).
func (w *Windows) Acquire(ctx context.Context, req WindowRequest) WindowGrant {
	a := &acquireCall{req: req}
	w.acquire(ctx, a)
	return a.g
}

// AcquireWithLease is Acquire that, when the window grants the slot, also
// takes lease request lreq of leases in the same script: one round trip
// where Acquire and Leases.Acquire take two, and the two grants made at
// one instant. tried reports whether the lease was asked for (the window
// granted); a lease refused leaves the window slot held, for the caller
// to give back (ReleaseWithLease), as after two calls. A request the one
// script cannot carry (leases on another client, a provider/kind without
// a limit, an owner's quota) is served by the two calls, and so is every
// request on a client that may shard keys (Redis Cluster, a Ring): the
// window's and the lease's keys carry different hash tags, which one
// script may touch only on a single Redis (a *redis.Client). When Redis
// cannot be reached both are granted uncounted (fail open).
func (w *Windows) AcquireWithLease(ctx context.Context, req WindowRequest, leases *Leases, lreq Request) (g WindowGrant, lease Lease, lg Grant, tried bool) {
	if _, single := w.kit.Client.(*redis.Client); !single || leases == nil || leases.kit.Client != w.kit.Client || lreq.Owner != "" {
		return w.acquireThenLease(ctx, req, leases, lreq)
	}
	lease, c, lkeys, largs := leases.acquireCall(lreq)
	if c == nil {
		return w.acquireThenLease(ctx, req, leases, lreq)
	}
	a := &acquireCall{req: req, c: c, lkeys: lkeys, largs: largs[1:]}
	w.acquire(ctx, a)
	if a.err != nil {
		lease, lg = leases.acquired(lease, c, nil, a.err)
		return a.g, lease, lg, true
	}
	if a.lr[0] < 0 {
		return a.g, Lease{}, Grant{}, false
	}
	lease, lg = leases.acquired(lease, c, a.lr, nil)
	return a.g, lease, lg, true
}

// acquireArgs is req's six arguments to windowAcquiresScript (holder,
// lane, order score, not before, probe, River job).
func (w *Windows) acquireArgs(req WindowRequest) []any {
	nb := int64(0)
	if !req.NotBefore.IsZero() {
		nb = req.NotBefore.UnixMilli()
	}
	probe := "0"
	if req.Probe {
		probe = "1"
	}
	return []any{req.Holder, laneArg(req.Lane), orderScore(req.Lane, req.Deadline), nb, probe, req.JobID}
}

// acquireThenLease is AcquireWithLease in two calls.
func (w *Windows) acquireThenLease(ctx context.Context, req WindowRequest, leases *Leases, lreq Request) (WindowGrant, Lease, Grant, bool) {
	g := w.Acquire(ctx, req)
	if !g.Granted || leases == nil {
		return g, Lease{}, Grant{}, false
	}
	lease, lg := leases.Acquire(ctx, lreq)
	return g, lease, lg, true
}

// register adds scope to the registry of windows (Scopes) unless this
// process did so less than windowRegisterEvery ago.
func (w *Windows) register(ctx context.Context, scope string) {
	now := time.Now()
	if w.cfg.testNow != nil {
		now = time.UnixMilli(w.cfg.testNow())
	}
	if at, ok := w.registered.Load(scope); ok && now.Sub(at.(time.Time)) < windowRegisterEvery {
		return
	}
	if err := w.kit.Client.SAdd(ctx, w.registryKey(), scope).Err(); err != nil {
		w.fail.Note("window register "+scope, err)
		return
	}
	w.registered.Store(scope, now)
}

// Release gives holder's slot of scope back with what the vendor's answer
// said (reason is recorded with a shrink). Releasing a holder without a
// slot does nothing. Redis failures are noted, never returned. The
// scope's releases waiting in this process (ReleaseLater) go first, in
// the same script.
func (w *Windows) Release(ctx context.Context, scope, holder string, o Outcome, reason string, max int) WindowRelease {
	return w.ReleaseWithLease(ctx, scope, holder, o, reason, max, nil, Lease{})
}

// ReleaseWithLease is Release and leases.Release(lease) in one round trip
// to Redis: a submission gives back its window slot and its vendor slot
// together when the vendor answers. With leases nil, a lease not counted,
// or leases on another Redis client than w, the lease goes back by its
// own Release.
func (w *Windows) ReleaseWithLease(ctx context.Context, scope, holder string, o Outcome, reason string, max int,
	leases *Leases, lease Lease) WindowRelease {
	var out WindowRelease
	r := w.queuedRelease(ctx, holder, o, reason, max, leases, lease, func(rel WindowRelease) { out = rel })
	w.send(ctx, scope, append(w.takeQueued(scope), r))
	return out
}

// Cooldown tells the window that the scope's vendor announced a cooldown
// (reason says why): it restarts from the single probe and grows back by
// slow start to the size it had.
func (w *Windows) Cooldown(ctx context.Context, scope, reason string, max int) {
	w.Flush(ctx, scope)
	octx, cancel := w.kit.Detached(ctx)
	defer cancel()
	if err := windowCooldownScript.Run(octx, w.kit.Client, w.keys(scope), w.nowArg(), w.args, max, reason).Err(); err != nil {
		w.fail.Note("window cooldown "+scope, err)
	}
}

// Refresh extends holder's slot by extra beyond the lease length (work the
// vendor accepted and is processing keeps its slot until its result). It
// reports whether the holder had a slot.
func (w *Windows) Refresh(ctx context.Context, scope, holder string, extra time.Duration) bool {
	w.Flush(ctx, scope)
	octx, cancel := w.kit.Detached(ctx)
	defer cancel()
	n, err := windowRefreshScript.Run(octx, w.kit.Client, w.keys(scope), w.nowArg(), w.args, 0, holder, extra.Milliseconds()).Int64()
	if err != nil {
		w.fail.Note("window refresh "+scope, err)
		return false
	}
	return n == 1
}

// Uncounted returns how many operations went ahead without Redis.
func (w *Windows) Uncounted() int64 { return w.fail.Uncounted() }

// WindowState is a scope's window as Redis has it.
type WindowState struct {
	Scope string `json:"scope"`
	// Size is how many requests may be in flight now.
	Size int `json:"size"`
	// Target is where slow start stops: the size the window had before
	// its last cooldown or shrink.
	Target int `json:"target"`
	// Ceiling is the smallest in-flight level that drew an overload and
	// has not succeeded since (0: none); not tried again before
	// CeilingAt plus the retry.
	Ceiling   int       `json:"ceiling"`
	CeilingAt time.Time `json:"ceiling_at"`
	// Proven is the most requests seen in flight with a success.
	Proven   int `json:"proven"`
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	// HoldMS is the measured time a slot is held, in milliseconds (a
	// moving average); it sizes the waits.
	HoldMS int64 `json:"hold_ms"`
	// Phase: "slow-start", "steady" or "probe" (restarted by a cooldown).
	Phase     string    `json:"phase"`
	UpdatedAt time.Time `json:"updated_at"`
}

// State reads scope's window (a scope never seen gets the initial one).
// An operator call: it returns Redis errors.
func (w *Windows) State(ctx context.Context, scope string) (WindowState, error) {
	vals, err := windowStatusScript.Run(ctx, w.kit.Client, w.keys(scope), w.nowArg(), w.args, 0).Slice()
	if err != nil {
		return WindowState{}, fmt.Errorf("capacity: reading the window of %s: %w", scope, err)
	}
	num := func(i int) int64 {
		switch v := vals[i].(type) {
		case int64:
			return v
		case string:
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
		return 0
	}
	phase, _ := vals[8].(string)
	s := WindowState{Scope: scope, Size: int(num(0)), Target: int(num(1)), Ceiling: int(num(2)), Proven: int(num(4)),
		InFlight: int(num(5)), Waiting: int(num(6)), HoldMS: num(7), Phase: phase,
		UpdatedAt: time.UnixMilli(num(9)).UTC()}
	if at := num(3); at > 0 {
		s.CeilingAt = time.UnixMilli(at).UTC()
	}
	return s, nil
}

// Scopes lists the scopes that have a window, sorted.
func (w *Windows) Scopes(ctx context.Context) ([]string, error) {
	s, err := w.kit.Client.SMembers(ctx, w.registryKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("capacity: listing windows: %w", err)
	}
	slices.Sort(s)
	return s, nil
}

// WindowEvent is one change of a scope's window, newest first in Events.
type WindowEvent struct {
	At time.Time `json:"at"`
	// Kind: open, grow, shrink, overload (kept), cooldown, cap, lapsed.
	Kind   string `json:"kind"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	Reason string `json:"reason"`
}

// Events returns scope's window events, newest first.
func (w *Windows) Events(ctx context.Context, scope string) ([]WindowEvent, error) {
	raw, err := w.kit.Client.LRange(ctx, w.keys(scope)[6], 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("capacity: reading the window events of %s: %w", scope, err)
	}
	out := make([]WindowEvent, 0, len(raw))
	for _, r := range raw {
		var e struct {
			At     int64  `json:"at"`
			Kind   string `json:"kind"`
			From   int    `json:"from"`
			To     int    `json:"to"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			return nil, fmt.Errorf("capacity: a window event of %s is not JSON: %w", scope, err)
		}
		out = append(out, WindowEvent{At: time.UnixMilli(e.At).UTC(), Kind: e.Kind, From: e.From, To: e.To, Reason: e.Reason})
	}
	return out, nil
}
