package live

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/internal/lane"
)

// Defaults and bounds of DialerConfig.
const (
	// DialRecheckDefault is how often a Dialer re-checks the queue by
	// default.
	DialRecheckDefault = 10 * time.Second
	// DialStateTTLDefault is how long a call's dial state lives in Redis
	// after its last change, so that a call never ended does not stay
	// queued or reserved for ever.
	DialStateTTLDefault = 24 * time.Hour
	// DialPassMax is the most queued calls one re-check pass looks at.
	DialPassMax = 1000
	// dialLockTTL bounds how long one process's re-check pass excludes the
	// others'; a pass that outlives it is still safe (a call is reserved
	// once: ZREM wins).
	dialLockTTL = 30 * time.Second
	// DialCheckWait bounds how long Dial waits for another process's
	// re-check pass to check a call it queued; after it, Dial answers
	// queued, waiting for WaitingForCheck.
	DialCheckWait = 2 * time.Second
)

// Why a queued call is waiting (QueuedCall.WaitingFor).
const (
	// WaitingForCheck: queued, not checked yet.
	WaitingForCheck = "capacity check"
	// WaitingForCapacity: checked, and no voice or no transcriber had
	// room.
	WaitingForCapacity = "provider capacity"
)

// Dial states of a call (DialState.State).
const (
	DialQueued   = "queued"
	DialReserved = "reserved"
	DialAnswered = "answered"
)

// ErrUnknownCall is what Dialer.State returns for a call it holds nothing
// for (never dialled through it, ended, or expired).
var ErrUnknownCall = errors.New("live: no dial state for that call")

// Call is an outbound call waiting to be dialled.
type Call struct {
	ID string `json:"id"`
	// Agent names the agent whose providers these are, for operators; it
	// may be "".
	Agent     string        `json:"agent,omitempty"`
	Providers CallProviders `json:"providers"`
}

// QueuedCall is a call in the dial queue and what it waits for.
type QueuedCall struct {
	Call       Call
	WaitingFor string    // WaitingForCheck or WaitingForCapacity
	QueuedAt   time.Time // Redis time of Enqueue
	Position   int       // 1 for the oldest

	// counted is storedCall.Counted: what the queuing process counts.
	counted []string
}

// storedCall is a call as the queue stores it: the call, and the
// provider/kind pairs of its providers ("deepgram/stt") that the process
// which queued it counts, having a limit for them. Processes sharing a
// queue can be configured apart for a while (a rolling change of limits,
// or two deployments on one Redis): a pass leaves a call naming a pair it
// does not count to a process that does, instead of reserving it
// uncounted, past the plan. A call stored without the list (an older
// version queued it) is checked by any pass.
type storedCall struct {
	Call
	Counted []string `json:"counted,omitempty"`
}

// countedPairs returns the provider/kind pairs of c's providers that this
// process counts.
func (d *Dialer) countedPairs(c Call) []string {
	var out []string
	add := func(kind string, providers []string) {
		for _, p := range providers {
			if _, ok := d.leases.Configured(p, kind); ok {
				out = append(out, p+"/"+kind)
			}
		}
	}
	add(capacity.KindSTT, c.Providers.STT)
	add(capacity.KindTTS, c.Providers.TTS)
	slices.Sort(out) // a provider listed twice is stored once
	return slices.Compact(out)
}

// countsAll reports whether this process counts every pair of pairs.
func (d *Dialer) countsAll(pairs []string) bool {
	for _, pair := range pairs {
		provider, kind, _ := strings.Cut(pair, "/")
		if _, ok := d.leases.Configured(provider, kind); !ok {
			return false
		}
	}
	return true
}

// Reservation is what a Dialer holds for a dialled call until it is
// answered (Answered) or ends (CallEnded).
type Reservation struct {
	CallID string
	// Transcriber is the transcriber slot reserved under the call's id
	// (never OverLimit: a dial waits instead, unless Redis is down).
	Transcriber TranscriberSlot
	// Voice is the voice provider found with room, the first in
	// Call.Providers.TTS order; "" when the call lists none.
	Voice string
}

// DialState is where a call stands in the Dialer.
type DialState struct {
	CallID string
	State  string // DialQueued, DialReserved or DialAnswered
	Call   Call
	// QueuedAt is Redis's time when the call was enqueued.
	QueuedAt time.Time
	// WaitingFor and Position are set while DialQueued.
	WaitingFor string
	Position   int
	// Reservation is set once DialReserved.
	Reservation Reservation
	// Uncounted says Redis could not be reached: the call was reserved
	// uncounted (fail open) and nothing is stored for it.
	Uncounted bool
}

// DialerConfig configures NewDialer.
type DialerConfig struct {
	// Recheck is how often Run re-checks the queue, besides every
	// CallEnded of this process. Default 0: DialRecheckDefault (10s).
	Recheck time.Duration
	// StateTTL is how long a call's dial state lives after its last
	// change. Default 0: DialStateTTLDefault (24h).
	StateTTL time.Duration
	// Timeline, when set, records each call's queueing, reservation,
	// answer and end. Default nil: none.
	Timeline *Timeline
	// DetachLeases: the transcriber leases reserved are dropped from this
	// process's held set (capacity.Leases.Forget), because their holder
	// (an HTTP client) refreshes them itself. Default false: this
	// process's Heartbeat keeps them alive.
	DetachLeases bool

	// tick replaces the re-check ticker (tests, see export_test.go).
	tick <-chan time.Time
}

// Dialer admits queued outbound calls when their providers have room.
// Before a call is dialled, one of its voice providers must have room and
// a transcriber slot is reserved under the call's id. The queue and the
// reservations live in Redis (hash tag "dial"), so any number of
// processes share them: any may enqueue, answer, end and re-check. It is
// safe for concurrent use.
type Dialer struct {
	leases *capacity.Leases
	kit    rediskit.Kit
	cfg    DialerConfig
	fail   *rediskit.FailOpen
	wake   chan struct{} // buffered 1: a re-check is due

	// unsure holds the reservations whose every reserve try failed with a
	// Redis error, by call id: each may or may not have gone in, so its
	// transcriber lease is kept (counted, and in this process's held set)
	// until a later pass learns which (resolveUnsure). Only the goroutine
	// holding the re-check lock touches it, but passes of one Dialer may
	// run in several goroutines one after another: hence the mutex.
	unsureMu sync.Mutex
	unsure   map[string]unsureReservation

	queueKey, lockKey, againKey string
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c DialerConfig) WithDefaults() DialerConfig {
	c.Recheck = cmp.Or(c.Recheck, DialRecheckDefault)
	c.StateTTL = cmp.Or(c.StateTTL, DialStateTTLDefault)
	return c
}

// NewDialer returns a Dialer taking its slots from leases and keeping its
// queue in r (use the Leases' handle, so that both share a key prefix).
func NewDialer(r *capacity.Redis, leases *capacity.Leases, cfg DialerConfig) (*Dialer, error) {
	if leases == nil {
		return nil, errors.New("live.NewDialer: Leases is nil")
	}
	if r == nil {
		return nil, errors.New("live.NewDialer: Redis is nil")
	}
	for name, d := range map[string]time.Duration{"Recheck": cfg.Recheck, "StateTTL": cfg.StateTTL} {
		if d < 0 {
			return nil, fmt.Errorf("DialerConfig.%s must not be negative, got %s", name, d)
		}
	}
	cfg = cfg.WithDefaults()
	kit := r.Kit()
	return &Dialer{leases: leases, kit: kit, cfg: cfg, fail: kit.NewFailOpen(), wake: make(chan struct{}, 1),
		unsure:   map[string]unsureReservation{},
		queueKey: kit.Key("dial", "queue"), lockKey: kit.Key("dial", "lock"), againKey: kit.Key("dial", "again")}, nil
}

func (d *Dialer) callKey(id string) string { return d.kit.Key("dial", "call", id) }

// Uncounted returns how many dial operations went ahead without Redis.
func (d *Dialer) Uncounted() int64 { return d.fail.Uncounted() }

// reservationJSON is a Reservation as stored in Redis.
type reservationJSON struct {
	Provider  string    `json:"provider"`
	FellBack  bool      `json:"fell_back,omitempty"`
	OverLimit bool      `json:"over_limit,omitempty"`
	LeaseID   string    `json:"lease_id,omitempty"`
	Holder    string    `json:"holder,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	Counted   bool      `json:"counted,omitempty"`
	Voice     string    `json:"voice,omitempty"`
}

func toReservationJSON(r Reservation) reservationJSON {
	l := r.Transcriber.Lease
	return reservationJSON{Provider: r.Transcriber.Provider, FellBack: r.Transcriber.FellBack, OverLimit: r.Transcriber.OverLimit,
		LeaseID: l.ID, Holder: l.Holder, Expires: l.Expires, Counted: l.Counted(), Voice: r.Voice}
}

func (d *Dialer) reservation(callID, raw string) Reservation {
	var j reservationJSON
	if raw == "" || json.Unmarshal([]byte(raw), &j) != nil {
		return Reservation{CallID: callID}
	}
	slot := TranscriberSlot{Provider: j.Provider, FellBack: j.FellBack, OverLimit: j.OverLimit}
	if j.LeaseID != "" {
		slot.Lease = d.leases.Restore(capacity.Lease{ID: j.LeaseID, Provider: j.Provider, Kind: capacity.KindSTT, Holder: j.Holder, Expires: j.Expires}, j.Counted)
	}
	return Reservation{CallID: callID, Transcriber: slot, Voice: j.Voice}
}

// TryDial checks whether c can be dialled now and, if so, takes its
// transcriber slot under c.ID (Live lane, primary then fallbacks). It
// stores nothing: Dial, Enqueue and Run reserve through it.
//
// The voice check takes a KindTTS lease of each voice provider in order
// and releases it at once (a probe): the Acquire script is the one source
// of truth for "room" (expired leases trimmed, learned and operator limits,
// the batch reserve), which a plain read of in-use against the configured
// limit would get wrong. The probe holds a slot for one round trip, so a
// reply starting in that instant may see the provider full and overflow.
// A call listing no voice provider passes the voice check.
//
// The voice is not reserved: a reply takes its slot when it speaks. If
// Redis is unreachable both checks pass uncounted (fail open).
func (d *Dialer) TryDial(ctx context.Context, c Call) (Reservation, bool) {
	voice, ok := d.probeVoice(ctx, c)
	if !ok {
		return Reservation{}, false
	}
	slot, ok := tryTranscriber(ctx, d.leases, c.ID, c.Providers.STT)
	if !ok && len(c.Providers.STT) > 0 {
		return Reservation{}, false
	}
	return Reservation{CallID: c.ID, Transcriber: slot, Voice: voice}, true
}

func (d *Dialer) probeVoice(ctx context.Context, c Call) (string, bool) {
	if len(c.Providers.TTS) == 0 {
		return "", true
	}
	for _, provider := range c.Providers.TTS {
		lease, g := d.leases.Acquire(ctx, capacity.Request{Provider: provider, Kind: capacity.KindTTS, Holder: c.ID + "#probe", Lane: lane.Live})
		if g.Granted {
			d.leases.Release(ctx, lease)
			return provider, true
		}
	}
	return "", false
}

// Enqueue adds c to the back of the shared queue (a call already known
// keeps its place and state) and prompts Run to check it. It reports
// false when Redis could not be reached (fail open: the caller may dial
// uncounted, see Dial).
func (d *Dialer) Enqueue(ctx context.Context, c Call) bool {
	ok := d.enqueue(ctx, c)
	d.prompt()
	return ok
}

func (d *Dialer) enqueue(ctx context.Context, c Call) bool {
	b, err := json.Marshal(storedCall{Call: c, Counted: d.countedPairs(c)})
	if err != nil {
		panic(fmt.Sprintf("live: encoding a call: %v", err)) // plain strings only
	}
	octx, cancel := d.kit.Detached(ctx)
	defer cancel()
	_, err = dialEnqueueScript.Run(octx, d.kit.Client, []string{d.queueKey, d.callKey(c.ID)}, "", c.ID, b, d.cfg.StateTTL.Milliseconds()).Int64Slice()
	if err != nil {
		d.fail.Note("dial enqueue", err)
		return false
	}
	return true
}

// Dial queues c and re-checks the queue at once, in this goroutine, then
// returns c's state: DialReserved when c (and every call queued before it
// that fits) found room, else DialQueued with what it waits for. A call
// already known is not queued again: its state is returned. When Redis
// cannot be reached, c is reserved uncounted (fail open, Uncounted).
// Calls that this check reserves besides c are handed to dial (nil: none).
// If another process holds the re-check lock at that moment, that process
// passes again for c and Dial waits up to DialCheckWait for it.
func (d *Dialer) Dial(ctx context.Context, c Call, dial func(Call, Reservation)) DialState {
	if !d.enqueue(ctx, c) {
		res, _ := d.TryDial(ctx, c)
		return DialState{CallID: c.ID, State: DialReserved, Call: c, Reservation: res, Uncounted: true}
	}
	d.Recheck(ctx, func(got Call, r Reservation) {
		if got.ID != c.ID && dial != nil {
			dial(got, r)
		}
	})
	st, err := d.State(ctx, c.ID)
	// Another process held the re-check lock: Recheck asked it to pass
	// again and returned. Wait (bounded) for that pass to check c, so
	// that a call with room is answered reserved, not "capacity check".
	for wait, until := time.Millisecond, time.Now().Add(DialCheckWait); err == nil && st.State == DialQueued &&
		st.WaitingFor == WaitingForCheck && time.Now().Before(until) && ctx.Err() == nil; wait = min(2*wait, 25*time.Millisecond) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		st, err = d.State(ctx, c.ID)
	}
	if err != nil { // Redis gone since, or ended meanwhile: fail open
		res, _ := d.TryDial(ctx, c)
		return DialState{CallID: c.ID, State: DialReserved, Call: c, Reservation: res, Uncounted: true}
	}
	return st
}

// State returns callID's dial state now; ErrUnknownCall if the Dialer
// holds nothing for it, or Redis's error.
func (d *Dialer) State(ctx context.Context, callID string) (DialState, error) {
	octx, cancel := d.kit.Detached(ctx)
	defer cancel()
	pipe := d.kit.Client.Pipeline()
	h := pipe.HGetAll(octx, d.callKey(callID))
	rank := pipe.ZRank(octx, d.queueKey, callID)
	if _, err := pipe.Exec(octx); err != nil && !errors.Is(err, redis.Nil) {
		return DialState{}, fmt.Errorf("reading the dial state of call %s: %w", callID, err)
	}
	v := h.Val()
	if len(v) == 0 {
		return DialState{}, ErrUnknownCall
	}
	st := DialState{CallID: callID, State: v["state"], WaitingFor: v["waiting_for"]}
	_ = json.Unmarshal([]byte(v["call"]), &st.Call)
	if ms, err := strconv.ParseInt(v["queued_at"], 10, 64); err == nil {
		st.QueuedAt = time.UnixMilli(ms).UTC()
	}
	if st.State == DialQueued {
		if r, err := rank.Result(); err == nil {
			st.Position = int(r) + 1
		}
	} else {
		st.WaitingFor = ""
		st.Reservation = d.reservation(callID, v["reservation"])
	}
	return st, nil
}

// Queued returns the calls waiting to be dialled, oldest first (at most
// DialPassMax), or Redis's error.
func (d *Dialer) Queued(ctx context.Context) ([]QueuedCall, error) {
	octx, cancel := d.kit.Detached(ctx)
	defer cancel()
	ids, err := d.kit.Client.ZRange(octx, d.queueKey, 0, DialPassMax-1).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the dial queue: %w", err)
	}
	pipe := d.kit.Client.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(octx, d.callKey(id), "call", "waiting_for", "queued_at", "state")
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(octx); err != nil {
			return nil, fmt.Errorf("reading the dial queue: %w", err)
		}
	}
	out := make([]QueuedCall, 0, len(ids))
	for i, id := range ids {
		v := cmds[i].Val()
		if s, _ := v[3].(string); s != DialQueued {
			continue // ended or expired meanwhile
		}
		q := QueuedCall{Call: Call{ID: id}, Position: len(out) + 1}
		if s, ok := v[0].(string); ok {
			stored := storedCall{Call: q.Call}
			_ = json.Unmarshal([]byte(s), &stored)
			q.Call, q.counted = stored.Call, stored.Counted
		}
		q.WaitingFor, _ = v[1].(string)
		if s, ok := v[2].(string); ok {
			if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
				q.QueuedAt = time.UnixMilli(ms).UTC()
			}
		}
		out = append(out, q)
	}
	return out, nil
}

// Answered hands the call's reservation over to the call: the reserved
// transcriber slot becomes the call's transcriber, released at CallEnded
// (or HangUp; doing both is harmless). It reports false if nothing is
// reserved for callID (unknown, still queued, or Redis unreachable).
func (d *Dialer) Answered(ctx context.Context, callID string) (TranscriberSlot, bool) {
	// Idempotent (reserved or answered become answered): a retry after a
	// lost reply answers the call's reservation too.
	res, err := d.runIdempotent(ctx, dialAnswerScript, []string{d.callKey(callID)}, d.cfg.StateTTL.Milliseconds()).StringSlice()
	if err != nil {
		d.fail.Note("dial answered", err)
		return TranscriberSlot{}, false
	}
	if len(res) < 2 {
		return TranscriberSlot{}, false
	}
	r := d.reservation(callID, res[1])
	if res[0] == DialReserved {
		d.cfg.Timeline.Record(ctx, TimelineEvent{CallID: callID, Kind: EventAnswered, Provider: r.Transcriber.Provider,
			Detail: "answered: the reserved transcriber is handed over to the call"})
	}
	return r.Transcriber, true
}

// CallEnded is told of every call end, dialled through the Dialer or not,
// by any process. It releases what is held for callID (a reservation never
// answered, or an answered call's transcriber slot), drops the call from
// the queue if it was still queued, and prompts Run to re-check the queue
// at once, since a slot may have freed up (other processes re-check at
// their next tick).
func (d *Dialer) CallEnded(ctx context.Context, callID string) {
	defer d.prompt()
	octx, cancel := d.kit.Detached(ctx)
	defer cancel()
	res, err := dialEndScript.Run(octx, d.kit.Client, []string{d.queueKey, d.callKey(callID)}, callID).StringSlice()
	if err != nil {
		d.fail.Note("dial call ended", err)
		return
	}
	if len(res) != 2 {
		return
	}
	r := d.reservation(callID, res[1])
	HangUp(ctx, d.leases, r.Transcriber)
	switch res[0] {
	case DialQueued:
		d.cfg.Timeline.Record(ctx, TimelineEvent{CallID: callID, Kind: EventDialCancelled, Detail: "the call ended while queued"})
	case DialReserved:
		d.cfg.Timeline.Record(ctx, TimelineEvent{CallID: callID, Kind: EventUnansweredEnd, Provider: r.Transcriber.Provider,
			Detail: "the call ended unanswered: its transcriber reservation was given back"})
	case DialAnswered:
		d.cfg.Timeline.Record(ctx, TimelineEvent{CallID: callID, Kind: EventCallEnded, Provider: r.Transcriber.Provider,
			Detail: "the call ended: its transcriber was released"})
	}
}

func (d *Dialer) prompt() {
	select {
	case d.wake <- struct{}{}:
	default: // a re-check is already due
	}
}

// Run dials queued calls as room appears: it re-checks the queue at once,
// every DialerConfig.Recheck, and whenever Enqueue or CallEnded of this
// process prompts it. Each call it reserves leaves the queue and is handed
// to dial, from Run's goroutine: dial should start the call and return
// (nil: the holder learns of it through State). Run returns when ctx is
// done; run one per Dialer, in as many processes as share the queue.
func (d *Dialer) Run(ctx context.Context, dial func(Call, Reservation)) {
	tick := d.cfg.tick
	if tick == nil {
		ticker := time.NewTicker(d.cfg.Recheck)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		// This pass answers every prompt made so far: prompts coalesce.
		select {
		case <-d.wake:
		default:
		}
		d.Recheck(ctx, dial)
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-d.wake:
		}
	}
}

// Recheck tries the queued calls once, oldest first, reserving each that
// has room; calls may differ in providers, so one with no room does not
// stop the next, but a call that shares a provider with an earlier call
// that found no room waits behind it (first in, first out per provider).
// One process re-checks at a time (a lock in Redis); a
// process that asks meanwhile makes the holder pass again, so no re-check
// is lost. Calls reserved are handed to dial (nil: none).
func (d *Dialer) Recheck(ctx context.Context, dial func(Call, Reservation)) {
	token := newDialToken()
	ttl := dialLockTTL.Milliseconds()
	octx, cancel := d.kit.Detached(ctx)
	got, err := dialLockScript.Run(octx, d.kit.Client, []string{d.lockKey, d.againKey}, token, ttl).Int()
	cancel()
	if err != nil {
		d.fail.Note("dial recheck", err)
		return
	}
	if got == 0 {
		return // the holder passes again for us
	}
	for {
		d.pass(ctx, dial)
		octx, cancel := d.kit.Detached(ctx)
		again, err := dialUnlockScript.Run(octx, d.kit.Client, []string{d.lockKey, d.againKey}, token, ttl).Int()
		cancel()
		if err != nil {
			d.fail.Note("dial recheck", err)
			return
		}
		if again == 0 || ctx.Err() != nil {
			return
		}
	}
}

func (d *Dialer) pass(ctx context.Context, dial func(Call, Reservation)) {
	d.resolveUnsure(ctx, dial)
	queued, err := d.Queued(ctx)
	if err != nil {
		d.fail.Note("dial recheck", err)
		return
	}
	// Providers a call earlier in the queue found full: a later call that
	// uses one of them waits, even if a slot frees up during this pass,
	// so that calls for the same providers are dialled in queue order.
	full := map[string]bool{}
	uses := func(c Call, mark bool) (blocked bool) {
		for _, kind := range [][]string{c.Providers.STT, c.Providers.TTS} {
			for _, p := range kind {
				blocked = blocked || full[p]
				if mark {
					full[p] = true
				}
			}
		}
		return blocked
	}
	for _, q := range queued {
		if ctx.Err() != nil {
			return
		}
		// A call this process cannot count as its queuer did is left to
		// a process that can (see storedCall). It holds no provider of
		// this pass: a call only other processes can judge must not stall
		// the calls this one can.
		if !d.countsAll(q.counted) {
			continue
		}
		var res Reservation
		// A call whose reservation is unsure already holds a slot: it
		// waits for its outcome, and so do the calls behind it.
		ok := !uses(q.Call, false) && !d.isUnsure(q.Call.ID)
		if ok {
			res, ok = d.TryDial(ctx, q.Call)
		}
		if !ok {
			uses(q.Call, true)
			octx, cancel := d.kit.Detached(ctx)
			changed, err := dialWaitingScript.Run(octx, d.kit.Client, []string{d.callKey(q.Call.ID)}, WaitingForCapacity).Int()
			cancel()
			if err == nil && changed == 1 {
				d.cfg.Timeline.Record(ctx, TimelineEvent{CallID: q.Call.ID, Kind: EventDialQueued,
					Detail: "queued: waiting for " + WaitingForCapacity + " (no voice or no transcriber had room)"})
			}
			continue
		}
		u := unsureReservation{call: q.Call, res: res}
		u.json, _ = json.Marshal(toReservationJSON(res))
		d.settle(ctx, u, dial)
	}
}

// unsureReservation is a reservation a pass tried to store: the call, the
// slot taken for it, and the reservation as stored.
type unsureReservation struct {
	call Call
	res  Reservation
	json []byte
}

// dialTries is how many times an idempotent dial script is run before
// its outcome is taken as unknown.
const dialTries = 3

// runIdempotent runs script, again on a failed round trip (up to
// dialTries), each try bounded by the kit's timeout: for a script that
// answers the same when run twice, a reply lost to a timeout is learned
// by the next try instead of being taken for a failure.
func (d *Dialer) runIdempotent(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	for range dialTries {
		octx, cancel := d.kit.Detached(ctx)
		cmd = script.Run(octx, d.kit.Client, keys, args...)
		cancel()
		var answered redis.Error // Redis replied (an error or nil): nothing was lost
		if err := cmd.Err(); err == nil || errors.As(err, &answered) || ctx.Err() != nil {
			break
		}
	}
	return cmd
}

// settle stores u's reservation and acts on the answer. Won: the call may
// be dialled (handed to dial). Lost (the call ended meanwhile, or another
// pass reserved it): the slot is given back. The script is idempotent, so
// a try whose reply was lost (a timeout after Redis ran it) is retried
// rather than taken for a loss: giving back a slot that a reserved call
// holds would let another call take it while the first is dialled, one
// more transcriber than the plan. When no try gets an answer, the slot is
// kept and u is left to a later pass (resolveUnsure).
func (d *Dialer) settle(ctx context.Context, u unsureReservation, dial func(Call, Reservation)) {
	won, err := d.runIdempotent(ctx, dialReserveScript, []string{d.queueKey, d.callKey(u.call.ID)}, u.call.ID, u.json, d.cfg.StateTTL.Milliseconds()).Int()
	d.unsureMu.Lock()
	if err != nil {
		d.unsure[u.call.ID] = u
	} else {
		delete(d.unsure, u.call.ID)
	}
	d.unsureMu.Unlock()
	switch {
	case err != nil:
		d.fail.Note("dial reserve (outcome unknown: the transcriber slot is kept until a later pass learns it)", err)
	case won == 0:
		HangUp(ctx, d.leases, u.res.Transcriber)
	default:
		if d.cfg.DetachLeases {
			d.leases.Forget(u.res.Transcriber.Lease.ID)
		}
		d.cfg.Timeline.Record(ctx, TimelineEvent{CallID: u.call.ID, Kind: EventDialReserved, Provider: u.res.Transcriber.Provider,
			Detail: fmt.Sprintf("transcriber %s reserved, voice %s has room: the call may be dialled", u.res.Transcriber.Provider, u.res.Voice)})
		if dial != nil {
			dial(u.call, u.res)
		}
	}
}

// resolveUnsure settles, first in each pass, the reservations whose
// outcome an earlier pass could not learn: the reserve script, being
// idempotent, answers won if the reservation went in (or goes in now, the
// call still queued) and lost otherwise.
func (d *Dialer) resolveUnsure(ctx context.Context, dial func(Call, Reservation)) {
	d.unsureMu.Lock()
	pending := make([]unsureReservation, 0, len(d.unsure))
	for _, u := range d.unsure {
		pending = append(pending, u)
	}
	d.unsureMu.Unlock()
	for _, u := range pending {
		d.settle(ctx, u, dial)
	}
}

// isUnsure reports whether callID's reservation awaits resolveUnsure.
func (d *Dialer) isUnsure(callID string) bool {
	d.unsureMu.Lock()
	defer d.unsureMu.Unlock()
	_, ok := d.unsure[callID]
	return ok
}

func newDialToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
