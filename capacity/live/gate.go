package live

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// Defaults and bounds of GateConfig.
const (
	// GateNameDefault is GateConfig.Name's default.
	GateNameDefault = "calls"
	// GateTimeoutDefault is how long Gate.Enter waits for room by default.
	GateTimeoutDefault = 4 * time.Second
	// GateTicketTTLDefault is GateConfig.TicketTTL's default: as long as a
	// call slot lives before it goes stale (capacity.StaleAfterDefault).
	GateTicketTTLDefault = 20 * time.Minute
	// GateSizeMax is the largest GateConfig.Size accepted.
	GateSizeMax = 100_000
	// GatePollMin and GatePollMax bound how long a waiting Enter sleeps
	// between two asks of Redis: the first wait is GatePollMin, each next
	// one twice the last (with jitter) up to GatePollMax. A ticket left in
	// the same process wakes its waiters at once.
	GatePollMin = 10 * time.Millisecond
	GatePollMax = 250 * time.Millisecond
	// GateIdleTTL is how long a gate's keys stay in Redis after their
	// newest ticket's expiry: then a gate nobody entered leaves Redis.
	GateIdleTTL = time.Hour
)

// UncountedTicketPrefix begins the id of a ticket granted without Redis
// (fail open): the id holds no place, and leaving it is a no-op.
const UncountedTicketPrefix = "uncounted-"

// ErrGateFull is what Gate.Enter returns, wrapped in a *GateFullError,
// when no room freed up within the admission timeout: the call goes to the
// overflow path instead of hanging inside a pool.
var ErrGateFull = errors.New("capacity: admission gate full")

// GateFullError says how full the gate was when Enter gave up.
// errors.Is(err, ErrGateFull) is true for it.
type GateFullError struct {
	Size int
	// InUse is the tickets held, as Redis last counted them.
	InUse int
	// Waited is how long Enter waited (its timeout, or less when the next
	// ask could not end before it).
	Waited time.Duration
	// Timeout is the wait Enter was given.
	Timeout time.Duration
}

func (e *GateFullError) Error() string {
	return fmt.Sprintf("no room among %d calls after %s: %s", e.Size, e.Timeout, ErrGateFull)
}

// Unwrap returns ErrGateFull.
func (e *GateFullError) Unwrap() error { return ErrGateFull }

// GateConfig configures NewGate.
type GateConfig struct {
	// Name names the gate: every Gate of the same name on the same Redis
	// (and key prefix), in any process, shares one set of tickets. An id
	// (capacity.CheckID). Default "": GateNameDefault ("calls").
	Name string
	// Size is how many calls may hold a ticket at once, over every process
	// sharing the gate. Required: 1–GateSizeMax and less than every
	// ceiling.
	Size int
	// Ceilings names the pools behind the gate and their sizes, such as
	// {"vendor_plan": 40, "sip_trunk": 100}: the gate is sized below the
	// smallest, so that a call waits visibly here, or is rejected to an
	// overflow path, instead of being refused inside a pool. Required: at
	// least one, each more than 0.
	Ceilings map[string]int
	// Timeout is how long Enter waits for room before rejecting.
	// Default 0: GateTimeoutDefault (4s). Negative: reject at once.
	Timeout time.Duration
	// TicketTTL is how long a ticket holds its place without a Leave; then
	// Redis time has passed its expiry and the next Enter, in any process,
	// reclaims the place, so a client that died does not hold it forever.
	// Default 0: GateTicketTTLDefault (20m).
	TicketTTL time.Duration
	// Overflow, when set, is called with Enter's context for each rejected
	// call (before Enter returns ErrGateFull), say to play a busy message.
	// Default nil: none.
	Overflow func(ctx context.Context)
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c GateConfig) WithDefaults() GateConfig {
	c.Name = cmp.Or(c.Name, GateNameDefault)
	c.Timeout = cmp.Or(c.Timeout, GateTimeoutDefault)
	c.TicketTTL = cmp.Or(c.TicketTTL, GateTicketTTLDefault)
	return c
}

// Validate returns the first field c gets wrong, naming it (for Size, the
// smallest ceiling). Run it on WithDefaults' result; NewGate does.
func (c GateConfig) Validate() error {
	if err := capacity.CheckID("GateConfig.Name", c.Name); err != nil {
		return err
	}
	if c.Size <= 0 || c.Size > GateSizeMax {
		return fmt.Errorf("GateConfig.Size must be more than 0 and at most %d, got %d", GateSizeMax, c.Size)
	}
	if c.TicketTTL <= 0 {
		return fmt.Errorf("GateConfig.TicketTTL must be positive, got %s", c.TicketTTL)
	}
	if len(c.Ceilings) == 0 {
		return errors.New("GateConfig.Ceilings must name at least one resource pool behind the gate")
	}
	smallest := ""
	for _, name := range slices.Sorted(maps.Keys(c.Ceilings)) {
		n := c.Ceilings[name]
		if n <= 0 {
			return fmt.Errorf("GateConfig.Ceilings[%q] must be more than 0, got %d", name, n)
		}
		if smallest == "" || n < c.Ceilings[smallest] {
			smallest = name
		}
	}
	if c.Size >= c.Ceilings[smallest] {
		return fmt.Errorf("GateConfig.Size %d must be below the smallest ceiling, %s = %d", c.Size, smallest, c.Ceilings[smallest])
	}
	return nil
}

// Gate is an admission gate in front of the pools a live call uses for
// its whole length (the vendor plan's concurrent streams, the telephony
// trunk's channels, the database connections), sized below the smallest
// of them. It is one semaphore in Redis, shared by every Gate of its name
// in every process: a call's place is a ticket in a sorted set scored by
// its expiry (Redis time), taken by one script that first reclaims the
// expired tickets, so the tickets held never exceed Size, and a ticket
// taken in one process can be left in any other.
//
// Like the rest of capacity it never fails a call on Redis: when Redis
// cannot be reached, Enter admits the call uncounted (Ticket.Uncounted)
// and a warning is logged at most once per capacity.RedisConfig's
// WarnInterval. It logs each admission (call_admitted), rejection
// (call_admission_rejected), leave (call_released) and reclaimed ticket
// (call_ticket_reclaimed) with the call's id, and counts them for the
// process's metrics (Stats). It is safe for concurrent use.
type Gate struct {
	kit    rediskit.Kit
	cfg    GateConfig
	fail   *rediskit.FailOpen
	keys   []string
	logger *slog.Logger

	waiting   atomic.Int64
	admitted  atomic.Int64
	rejected  atomic.Int64
	reclaimed atomic.Int64
	waits     [2]waitHistogram // by GateOutcome

	// wake is closed (and replaced) when a ticket is left in this process,
	// waking this process's waiters at once.
	wakeMu sync.Mutex
	wake   chan struct{}
}

// NewGate returns the gate of cfg.Name counted in r, each round trip
// bounded by capacity.RedisConfig.AdmitOpTimeout, or an error naming the
// field cfg gets wrong.
func NewGate(r *capacity.Redis, cfg GateConfig) (*Gate, error) {
	if r == nil {
		return nil, errors.New("live.NewGate: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kit := r.Kit().Admission()
	tag := "gate/" + cfg.Name
	return &Gate{kit: kit, cfg: cfg, fail: kit.NewFailOpen(), logger: kit.Logger,
		keys: []string{kit.Key(tag, "tickets"), kit.Key(tag, "holders")}, wake: make(chan struct{})}, nil
}

// Ticket is one call's place in the gate, given by Enter and given back by
// Leave (in any process).
type Ticket struct {
	// ID names the ticket: 32 lowercase hex characters, or, when
	// Uncounted, UncountedTicketPrefix and 22 of them.
	ID string
	// Org and CallID are the holder given to Enter ("" when none).
	Org, CallID string
	// ExpiresAt is when the place is reclaimed unless left first (Redis
	// time). Zero when Uncounted.
	ExpiresAt time.Time
	// Waited is how long Enter waited for room.
	Waited time.Duration
	// InUse is the tickets held just after this one was granted (0 when
	// Uncounted).
	InUse int
	// Uncounted says Redis could not be reached and the call was admitted
	// without a place (fail open).
	Uncounted bool
}

// Enter is EnterWithin with the configured timeout.
func (g *Gate) Enter(ctx context.Context, org, callID string) (Ticket, error) {
	return g.EnterWithin(ctx, org, callID, g.cfg.Timeout)
}

// EnterWithin admits the call callID of organisation org (either may be
// "": a call the caller does not name) through the gate, waiting up to
// timeout for room (0 or negative: no wait, reject at once when full). A
// waiting call asks Redis again after GatePollMin, then twice as long each
// time up to GatePollMax, and at once when a ticket is left in this
// process. If no room frees up in time it counts a rejection, calls
// Overflow if set, and returns a *GateFullError (errors.Is ErrGateFull);
// if ctx ends first, ctx's error, without a rejection and holding nothing.
// When Redis cannot be reached it returns an Uncounted ticket and nil.
// An org or callID that is not an id (capacity.CheckID) is an error.
func (g *Gate) EnterWithin(ctx context.Context, org, callID string, timeout time.Duration) (Ticket, error) {
	for _, id := range [][2]string{{"org", org}, {"call_id", callID}} {
		if id[1] != "" {
			if err := capacity.CheckID(id[0], id[1]); err != nil {
				return Ticket{}, err
			}
		}
	}
	timeout = max(timeout, 0)
	start := time.Now()
	deadline := start.Add(timeout)
	id, err := newTicketID()
	if err != nil {
		return g.admitUncounted(ctx, org, callID, start, err), nil
	}
	holder := org + "\n" + callID
	poll := GatePollMin
	var timer *time.Timer
	waiting := false
	inUse := 0
	for {
		if err := ctx.Err(); err != nil {
			return Ticket{}, fmt.Errorf("entering admission gate %s: %w", g.cfg.Name, err)
		}
		wake := g.wakeChan()
		res, err := g.tryEnter(ctx, id, holder)
		if err != nil {
			if ctx.Err() != nil {
				return Ticket{}, fmt.Errorf("entering admission gate %s: %w", g.cfg.Name, ctx.Err())
			}
			return g.admitUncounted(ctx, org, callID, start, err), nil
		}
		g.noteReclaimed(ctx, res.reclaimed)
		inUse = res.inUse
		if res.granted {
			t := Ticket{ID: id, Org: org, CallID: callID, ExpiresAt: time.UnixMilli(res.expMs).UTC(),
				Waited: time.Since(start), InUse: res.inUse}
			if ctx.Err() != nil { // the caller gave up during the round trip
				g.LeaveTicket(context.WithoutCancel(ctx), org, id)
				return Ticket{}, fmt.Errorf("entering admission gate %s: %w", g.cfg.Name, ctx.Err())
			}
			g.admitted.Add(1)
			g.waits[GateAdmitted].observe(t.Waited)
			g.logger.InfoContext(ctx, "call_admitted", slog.String("gate", g.cfg.Name), slog.String("org", org),
				slog.String("call_id", callID), slog.Duration("waited", t.Waited), slog.Int("in_use", t.InUse),
				slog.Int("size", g.cfg.Size), slog.Bool("uncounted", false))
			return t, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		// Jitter over the upper half: waiters of several processes do not
		// ask in step.
		sleep := min(left, poll/2+mrand.N(poll/2+1))
		poll = min(2*poll, GatePollMax)
		if timer == nil {
			g.waiting.Add(1)
			timer = time.NewTimer(sleep)
			defer func() {
				timer.Stop()
				if waiting {
					g.waiting.Add(-1)
				}
			}()
			waiting = true
		} else {
			timer.Reset(sleep) // no stale tick since Go 1.23's timers
		}
		select {
		case <-ctx.Done():
			return Ticket{}, fmt.Errorf("entering admission gate %s: %w", g.cfg.Name, ctx.Err())
		case <-timer.C:
		case <-wake:
			timer.Stop()
		}
	}
	if waiting {
		g.waiting.Add(-1)
		waiting = false
	}
	waited := time.Since(start)
	g.rejected.Add(1)
	g.waits[GateRejected].observe(waited)
	g.logger.InfoContext(ctx, "call_admission_rejected", slog.String("gate", g.cfg.Name), slog.String("org", org),
		slog.String("call_id", callID), slog.Duration("waited", waited), slog.Duration("timeout", timeout),
		slog.Int("in_use", inUse), slog.Int("size", g.cfg.Size))
	if g.cfg.Overflow != nil {
		g.cfg.Overflow(ctx)
	}
	return Ticket{}, &GateFullError{Size: g.cfg.Size, InUse: inUse, Waited: waited, Timeout: timeout}
}

// admitUncounted is Enter failing open: the call goes ahead holding no
// place, counted as admitted and as a fail-open grant.
func (g *Gate) admitUncounted(ctx context.Context, org, callID string, start time.Time, err error) Ticket {
	g.fail.Note("gate enter", err)
	var b [11]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	t := Ticket{ID: UncountedTicketPrefix + hex.EncodeToString(b[:]), Org: org, CallID: callID, Waited: time.Since(start), Uncounted: true}
	g.admitted.Add(1)
	g.waits[GateAdmitted].observe(t.Waited)
	g.logger.InfoContext(ctx, "call_admitted", slog.String("gate", g.cfg.Name), slog.String("org", org),
		slog.String("call_id", callID), slog.Duration("waited", t.Waited), slog.Int("in_use", 0),
		slog.Int("size", g.cfg.Size), slog.Bool("uncounted", true))
	return t
}

type gateEnterResult struct {
	granted   bool
	inUse     int
	expMs     int64
	reclaimed []string
}

// tryEnter runs the enter script once. Its round trip is detached from
// ctx's cancellation (bounded by the admission round-trip timeout), so
// that a grant is always known: a caller that gave up meanwhile leaves it.
func (g *Gate) tryEnter(ctx context.Context, id, holder string) (gateEnterResult, error) {
	octx, cancel := g.kit.Detached(ctx)
	defer cancel()
	vals, err := gateEnterScript.Run(octx, g.kit.Client, g.keys, "", id, g.cfg.TicketTTL.Milliseconds(), g.cfg.Size, holder,
		(g.cfg.TicketTTL + GateIdleTTL).Milliseconds()).Slice()
	if err != nil {
		return gateEnterResult{}, err
	}
	if len(vals) < 3 {
		return gateEnterResult{}, fmt.Errorf("gate enter script returned %d values, want at least 3", len(vals))
	}
	var r gateEnterResult
	granted, ok1 := vals[0].(int64)
	inUse, ok2 := vals[1].(int64)
	exp, ok3 := vals[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return gateEnterResult{}, fmt.Errorf("gate enter script returned %v", vals[:3])
	}
	r.granted, r.inUse, r.expMs = granted == 1, int(inUse), exp
	for _, v := range vals[3:] {
		s, _ := v.(string)
		r.reclaimed = append(r.reclaimed, s)
	}
	return r, nil
}

// noteReclaimed logs and counts the tickets an enter script reclaimed.
func (g *Gate) noteReclaimed(ctx context.Context, holders []string) {
	for _, h := range holders {
		org, callID, admitted := splitHolder(h)
		g.reclaimed.Add(1)
		g.logger.WarnContext(ctx, "call_ticket_reclaimed", slog.String("gate", g.cfg.Name), slog.String("org", org),
			slog.String("call_id", callID), slog.Time("admitted_at", admitted), slog.Duration("ticket_ttl", g.cfg.TicketTTL))
	}
	if len(holders) > 0 {
		g.wakeWaiters()
	}
}

// Leave gives t's place back (LeaveTicket of t's organisation and id).
func (g *Gate) Leave(ctx context.Context, t Ticket) bool { return g.LeaveTicket(ctx, t.Org, t.ID) }

// LeaveTicket gives back the place of the ticket of that id, given by
// Enter in any process, if it belongs to organisation org ("": a ticket of
// any organisation). It reports false, touching nothing, when no live
// ticket of that id is org's: left already, past its expiry (its place
// reclaimed or about to be), another organisation's, or never given. An
// uncounted ticket (UncountedTicketPrefix) holds no place: true, without
// Redis. When Redis cannot be reached it fails open: true, and the place,
// if any, is reclaimed after its TTL. Leave runs to its end even if ctx is
// cancelled (within the round-trip bound).
func (g *Gate) LeaveTicket(ctx context.Context, org, id string) bool {
	if strings.HasPrefix(id, UncountedTicketPrefix) {
		g.logger.InfoContext(ctx, "call_released", slog.String("gate", g.cfg.Name), slog.String("org", org),
			slog.Bool("uncounted", true))
		return true
	}
	octx, cancel := g.kit.Detached(ctx)
	defer cancel()
	vals, err := gateLeaveScript.Run(octx, g.kit.Client, g.keys[:2], "", id, org).Slice()
	if err == nil && len(vals) != 3 {
		err = fmt.Errorf("gate leave script returned %d values, want 3", len(vals))
	}
	if err != nil {
		g.fail.Note("gate leave", err)
		return true
	}
	if left, _ := vals[0].(int64); left != 1 {
		return false
	}
	g.wakeWaiters()
	h, _ := vals[1].(string)
	now, _ := vals[2].(int64)
	owner, callID, admitted := splitHolder(h)
	attrs := []slog.Attr{slog.String("gate", g.cfg.Name), slog.String("org", owner), slog.String("call_id", callID)}
	if !admitted.IsZero() {
		attrs = append(attrs, slog.Duration("held", time.UnixMilli(now).Sub(admitted)))
	}
	g.logger.LogAttrs(ctx, slog.LevelInfo, "call_released", attrs...)
	return true
}

// splitHolder reads a holder value, "org\ncall_id\nadmitted ms".
func splitHolder(h string) (org, callID string, admitted time.Time) {
	parts := strings.SplitN(h, "\n", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil && ms > 0 {
		admitted = time.UnixMilli(ms).UTC()
	}
	return parts[0], parts[1], admitted
}

func (g *Gate) wakeChan() <-chan struct{} {
	g.wakeMu.Lock()
	defer g.wakeMu.Unlock()
	return g.wake
}

func (g *Gate) wakeWaiters() {
	g.wakeMu.Lock()
	defer g.wakeMu.Unlock()
	close(g.wake)
	g.wake = make(chan struct{})
}

// InUse returns how many tickets are held now, over every process sharing
// the gate, as Redis counts them (tickets past their expiry not counted).
func (g *Gate) InUse(ctx context.Context) (int, error) {
	octx, cancel := g.kit.Op(ctx)
	defer cancel()
	n, err := gateInUseScript.Run(octx, g.kit.Client, g.keys[:1], "").Int64()
	if err != nil {
		return 0, fmt.Errorf("counting the tickets of admission gate %s: %w", g.cfg.Name, err)
	}
	return int(n), nil
}

// Waiting returns how many calls are waiting in Enter in this process now
// (a gauge).
func (g *Gate) Waiting() int64 { return g.waiting.Load() }

// Admitted returns how many calls Enter has admitted in this process,
// uncounted ones included (a counter).
func (g *Gate) Admitted() int64 { return g.admitted.Load() }

// Rejected returns how many calls Enter has rejected in this process (a
// counter).
func (g *Gate) Rejected() int64 { return g.rejected.Load() }

// Reclaimed returns how many tickets past their TTL this process's Enter
// calls have reclaimed (a counter).
func (g *Gate) Reclaimed() int64 { return g.reclaimed.Load() }

// Uncounted returns how many calls Enter admitted without Redis, and how
// many leaves went ahead without it (a counter).
func (g *Gate) Uncounted() int64 { return g.fail.Uncounted() }

// Name returns the gate's name.
func (g *Gate) Name() string { return g.cfg.Name }

// Timeout returns how long Enter waits for room.
func (g *Gate) Timeout() time.Duration { return g.cfg.Timeout }

// TicketTTL returns how long a ticket holds its place without a Leave.
func (g *Gate) TicketTTL() time.Duration { return g.cfg.TicketTTL }

// Size returns how many calls the gate admits at once.
func (g *Gate) Size() int { return g.cfg.Size }

// newTicketID names one ticket: 128 random bits in hex.
func newTicketID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making a gate ticket: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
