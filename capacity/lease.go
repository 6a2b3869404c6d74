package capacity

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/internal/lane"
)

// Lane says whose traffic a lease is for: lane.Live (and the zero Lane)
// may use every slot up to the limit, lane.Batch only Limit −
// BatchReserve, so that live traffic keeps the reserve. It is the one lane
// type of the ledger, the pipeline and capacity.
type Lane = lane.Lane

// ProviderLimit is the configured concurrency of one provider and kind.
type ProviderLimit struct {
	// Limit is how many streams the vendor plan allows at once,
	// platform-wide. 0 allows none.
	Limit int
	// BatchReserve is how many of those slots batch work may not take: they
	// are kept for live traffic. 0 lets batch work use every slot.
	BatchReserve int
}

// Config configures New.
type Config struct {
	// Limits maps "provider/kind" (kind KindSTT or KindTTS) to its limit.
	// A provider/kind not listed here is not counted: Acquire grants it
	// uncounted and warns once.
	Limits map[string]ProviderLimit

	// LeaseSTT is how long a transcriber lease lives without a refresh.
	// Default 0: LeaseSTTDefault (90s).
	LeaseSTT time.Duration
	// LeaseTTS is how long a voice lease lives without a refresh.
	// Default 0: LeaseTTSDefault (60s).
	LeaseTTS time.Duration
	// HeartbeatEvery is how often a Heartbeat refreshes the held leases;
	// it must be shorter than both lease lengths.
	// Default 0: HeartbeatEveryDefault (20s).
	HeartbeatEvery time.Duration
	// PeakRetention is how long per-minute peak usage is kept.
	// Default 0: PeakRetentionDefault (24h).
	PeakRetention time.Duration
	// LimitEventsCap is how many limit events (learned drops, operator
	// sets) are kept per provider/kind. Default 0: LimitEventsCapDefault.
	LimitEventsCap int

	// OnLimitLearned, when set, is called after a vendor refusal lowered a
	// limit (ReportRefusal), on the reporting goroutine: it must not block
	// (hand the alert to a queue). Default nil: the alert is logged and
	// counted (LimitAlerts) only.
	OnLimitLearned func(LimitLearned)

	// testNow, when set (tests only, see lease_export_test.go), replaces
	// Redis TIME inside the scripts with its value in Unix milliseconds, so
	// property tests can move time deterministically. Never set in
	// production: all processes must share Redis's clock.
	testNow func() int64
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c Config) WithDefaults() Config {
	c.LeaseSTT = cmp.Or(c.LeaseSTT, LeaseSTTDefault)
	c.LeaseTTS = cmp.Or(c.LeaseTTS, LeaseTTSDefault)
	c.HeartbeatEvery = cmp.Or(c.HeartbeatEvery, HeartbeatEveryDefault)
	c.PeakRetention = cmp.Or(c.PeakRetention, PeakRetentionDefault)
	c.LimitEventsCap = cmp.Or(c.LimitEventsCap, LimitEventsCapDefault)
	return c
}

// Validate returns every field c gets wrong, each error naming the field,
// such as "HeartbeatEvery: must be shorter than LeaseSTT (…) and LeaseTTS
// (…)". Run it on WithDefaults' result.
func (c Config) Validate() error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(c.Limits)) {
		pl := c.Limits[key]
		provider, kind, ok := strings.Cut(key, "/")
		if !ok || provider == "" || strings.ContainsAny(provider, "{}") || (kind != KindSTT && kind != KindTTS) {
			errs = append(errs, fmt.Errorf("Limits[%q]: key must be \"provider/stt\" or \"provider/tts\" (provider without braces)", key)) //nolint:staticcheck // starts with the Go path of the field, as every Validate error does
		}
		if pl.Limit < 0 || pl.BatchReserve < 0 {
			errs = append(errs, fmt.Errorf("Limits[%q]: must not be negative, got %+v", key, pl)) //nolint:staticcheck // starts with the Go path of the field
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"LeaseSTT", c.LeaseSTT}, {"LeaseTTS", c.LeaseTTS}, {"HeartbeatEvery", c.HeartbeatEvery}, {"PeakRetention", c.PeakRetention}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", f.name, f.d))
		}
	}
	if c.HeartbeatEvery >= min(c.LeaseSTT, c.LeaseTTS) {
		errs = append(errs, fmt.Errorf("HeartbeatEvery: %s must be shorter than LeaseSTT (%s) and LeaseTTS (%s)", c.HeartbeatEvery, c.LeaseSTT, c.LeaseTTS))
	}
	if c.LimitEventsCap < 0 {
		errs = append(errs, fmt.Errorf("LimitEventsCap: must not be negative, got %d", c.LimitEventsCap))
	}
	return errors.Join(errs...)
}

// Leases counts vendor slots. It is safe for concurrent use; one per
// process is the intent, since it tracks the leases the process holds for
// its Heartbeat.
type Leases struct {
	cfg    Config
	kit    rediskit.Kit
	fail   *rediskit.FailOpen
	logger *slog.Logger

	// counters holds each configured provider/kind's keys and script
	// arguments, built once in New.
	counters map[counterKey]*counter

	mu   sync.Mutex
	held map[string]Lease // by ID: counted leases this process holds

	warnedUnknown sync.Map // "provider/kind" → struct{}
	limitAlerts   atomic.Int64
}

// New returns Leases counting in r for cfg after filling defaults, or an
// error naming each field cfg gets wrong.
func New(r *Redis, cfg Config) (*Leases, error) {
	if r == nil {
		return nil, errors.New("capacity.New: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("capacity: Config: %w", err)
	}
	// A copy: the limits are read here, once; the caller's map may change.
	cfg.Limits = maps.Clone(cfg.Limits)
	l := &Leases{
		cfg:      cfg,
		kit:      r.kit,
		fail:     r.kit.NewFailOpen(),
		logger:   r.kit.Logger,
		counters: make(map[counterKey]*counter, len(cfg.Limits)),
		held:     make(map[string]Lease),
	}
	for tag, pl := range cfg.Limits {
		provider, kind := splitTag(tag)
		l.counters[counterKey{provider, kind}] = &counter{
			tag:          tag,
			limit:        pl,
			leasesKey:    l.leasesKey(tag),
			leasesKeys:   []string{l.leasesKey(tag)},
			acquireKeys:  []string{l.leasesKey(tag), l.limitKey(tag), l.peakKey(tag)},
			leaseMs:      l.leaseLen(kind).Milliseconds(),
			limitArg:     pl.Limit,
			liveReserve:  0,
			batchReserve: pl.BatchReserve,
			retentionMs:  cfg.PeakRetention.Milliseconds(),
		}
	}
	return l, nil
}

// counterKey names a provider/kind without building its tag.
type counterKey struct{ provider, kind string }

// counter is one configured provider/kind with what Acquire and Release
// send to Redis for it, built once in New: its keys, and the script's
// constant arguments already converted to interface values, so that a
// call allocates neither.
type counter struct {
	tag         string // "provider/kind", the keys' hash tag
	limit       ProviderLimit
	leasesKey   string
	leasesKeys  []string // the leases zset alone, for the refresh script
	acquireKeys []string // leases zset, limit hash, peak hash
	// Acquire's arguments: lease length and peak retention in ms, the
	// configured limit, each lane's reserve.
	leaseMs, limitArg, liveReserve, batchReserve, retentionMs any
}

// counterOf returns provider/kind's counter, nil when no limit is configured.
func (l *Leases) counterOf(provider, kind string) *counter {
	return l.counters[counterKey{provider, kind}]
}

// Acquire's keyed argument (ARGV[7]), as interface values made once.
var keyedArg, unkeyedArg any = "1", "0"

// Request asks for one slot.
type Request struct {
	Provider string // e.g. "deepgram"
	Kind     string // KindSTT or KindTTS
	Holder   string // the call id or job id, for operators reading Redis
	Lane     Lane
	// ID, when set, is the lease's id instead of a random one: a holder
	// that must find its lease again from another process or after a
	// restart (the pipeline keys its leases by recording). Asking again
	// for an ID already held grants it again and renews it.
	ID string
	// Owner, when set, is whom the lease is taken for (the HTTP API: an
	// organisation); the lease then also counts against the owner's quota
	// of the provider/kind, ceil(effective limit × OwnerShare) and at least
	// 1, so one owner cannot take every slot. Leases taken with an Owner
	// are counted in a set per owner beside the leases; keyed requests (ID
	// set) are not counted against an owner.
	Owner string
	// OwnerShare is the share of the effective limit one Owner may hold,
	// in (0, 1]. Ignored without Owner; 0 or above 1: 1.
	OwnerShare float64
}

// Lease is one slot held. The zero Lease (refused) may be released.
type Lease struct {
	ID       string
	Provider string
	Kind     string
	Holder   string
	// Expires is when the lease lapses unless refreshed (Redis time).
	Expires time.Time

	counted bool // false: refused, or granted uncounted (fail open)
}

// Counted reports whether the lease is counted in Redis: false for the
// zero (refused) Lease and for one granted uncounted (Redis unreachable,
// or no limit configured).
func (l Lease) Counted() bool { return l.counted }

// Grant is Acquire's answer.
type Grant struct {
	// Granted says whether the caller may open the stream.
	Granted bool
	// InUse is how many leases of the provider/kind are held, this one
	// included when granted. 0 when Uncounted.
	InUse int
	// Limit is the effective limit of the provider/kind (configured,
	// operator-set or learned); for a Batch request the lane's cap is
	// Limit − BatchReserve.
	Limit int
	// Uncounted says the grant was made without Redis (fail open) or for a
	// provider/kind with no configured limit.
	Uncounted bool
	// OwnerInUse and OwnerQuota: with Request.Owner, how many leases of
	// the provider/kind the owner holds (this one included when granted)
	// and its quota. 0 without an owner or when Uncounted.
	OwnerInUse, OwnerQuota int
	// OverQuota says the request was refused because the owner holds its
	// quota, though the lane may have had room.
	OverQuota bool
}

// LeaseLength is how long a lease of kind lives without a refresh.
func (l *Leases) LeaseLength(kind string) time.Duration { return l.leaseLen(kind) }

func (l *Leases) leaseLen(kind string) time.Duration {
	if kind == KindTTS {
		return l.cfg.LeaseTTS
	}
	return l.cfg.LeaseSTT
}

func (l *Leases) tag(provider, kind string) string { return provider + "/" + kind }

func (l *Leases) leasesKey(tag string) string       { return l.kit.Key(tag, "leases") }
func (l *Leases) limitKey(tag string) string        { return l.kit.Key(tag, "limit") }
func (l *Leases) peakKey(tag string) string         { return l.kit.Key(tag, "peak") }
func (l *Leases) eventsKey(tag string) string       { return l.kit.Key(tag, "events") }
func (l *Leases) ownerKey(tag, owner string) string { return l.kit.Key(tag, "owner", owner) }

// nowArg is the scripts' time argument (ARGV[1]): "" means Redis TIME.
func (l *Leases) nowArg() string {
	if l.cfg.testNow != nil {
		return rediskit.NowArg(l.cfg.testNow())
	}
	return ""
}

func newLeaseID(holder string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	var h [2 * len(b)]byte
	hex.Encode(h[:], b[:])
	var id strings.Builder
	id.Grow(len(holder) + 1 + len(h))
	id.WriteString(holder)
	id.WriteByte('#')
	id.Write(h[:])
	return id.String()
}

// Acquire takes one slot of req.Provider/req.Kind if the lane has one free.
// It never fails: when Redis cannot be reached it grants uncounted (fail
// open), and a provider/kind without a configured limit is granted
// uncounted too. A granted lease must be released; the process's Heartbeat
// keeps it alive meanwhile. ctx's cancellation is ignored (a hung-up call
// still gets a definite answer); each Redis round trip is bounded by
// RedisConfig.OpTimeout.
func (l *Leases) Acquire(ctx context.Context, req Request) (Lease, Grant) {
	lease, c, keys, args := l.acquireCall(req)
	if c == nil {
		return lease, Grant{Granted: true, Uncounted: true}
	}
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	res, err := acquireScript.Run(octx, l.kit.Client, keys, args...).Int64Slice()
	return l.acquired(lease, c, res, err)
}

// acquireCall is what req's acquire sends: the lease it would grant, its
// provider/kind's counter, and the acquire script's keys and arguments
// (ARGV[1], the clock, first). A nil counter: the provider/kind has no
// configured limit, and the lease is granted uncounted, unsent.
func (l *Leases) acquireCall(req Request) (lease Lease, c *counter, keys []string, args []any) {
	lease = Lease{ID: req.ID, Provider: req.Provider, Kind: req.Kind, Holder: req.Holder}
	keyed := keyedArg
	if lease.ID == "" {
		lease.ID, keyed = newLeaseID(req.Holder), unkeyedArg
	}
	c = l.counterOf(req.Provider, req.Kind)
	if c == nil {
		if _, warned := l.warnedUnknown.LoadOrStore(l.tag(req.Provider, req.Kind), struct{}{}); !warned {
			l.logger.Warn("capacity: no limit configured; not counting", slog.String("provider", req.Provider), slog.String("kind", req.Kind))
		}
		lease.Expires = l.kit.Clock.Now().Add(l.leaseLen(req.Kind))
		return lease, nil, nil, nil
	}
	reserve := c.liveReserve
	if req.Lane.IsBatch() {
		reserve = c.batchReserve
	}
	keys, args = c.acquireKeys, []any{l.nowArg(), lease.ID, c.leaseMs, c.limitArg, reserve, c.retentionMs, keyed}
	if req.Owner != "" && req.ID == "" {
		share := req.OwnerShare
		if share <= 0 || share > 1 {
			share = 1
		}
		keys = append(keys[:len(keys):len(keys)], l.ownerKey(c.tag, req.Owner))
		args = append(args, strconv.FormatFloat(share, 'f', -1, 64))
	}
	return lease, c, keys, args
}

// acquired reads the acquire script's answer res (granted, in use,
// effective limit, expiry ms, owner in use, owner quota; the last two
// may be missing), or its error err (fail open: granted uncounted), into
// lease and its Grant; a counted lease joins the held set.
func (l *Leases) acquired(lease Lease, c *counter, res []int64, err error) (Lease, Grant) {
	if err != nil {
		l.fail.Note("acquire "+c.tag, err)
		lease.Expires = l.kit.Clock.Now().Add(l.leaseLen(lease.Kind))
		return lease, Grant{Granted: true, Limit: c.limit.Limit, Uncounted: true}
	}
	g := Grant{Granted: res[0] == 1, InUse: int(res[1]), Limit: int(res[2])}
	if len(res) >= 6 {
		g.OwnerInUse, g.OwnerQuota = int(res[4]), int(res[5])
	}
	if !g.Granted {
		g.OverQuota = g.OwnerQuota > 0 && g.OwnerInUse >= g.OwnerQuota
		return Lease{}, g
	}
	lease.Expires = time.UnixMilli(res[3])
	lease.counted = true
	l.mu.Lock()
	l.held[lease.ID] = lease
	l.mu.Unlock()
	return lease, g
}

// Release gives the slot back. It is idempotent, a refused or uncounted
// lease is a no-op, and a Redis failure is noted (fail open), never
// returned: the lease then lapses at its expiry. Like Acquire it ignores
// ctx's cancellation, so a call's cancelled context still releases.
func (l *Leases) Release(ctx context.Context, lease Lease) {
	if c := l.releasing(lease); c != nil {
		l.removeLease(ctx, c, lease.ID)
	}
}

// removeLease removes lease id from c's leases in Redis.
func (l *Leases) removeLease(ctx context.Context, c *counter, id string) {
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	if err := l.kit.Client.ZRem(octx, c.leasesKey, id).Err(); err != nil {
		l.fail.Note("release "+c.tag, err)
	}
}

// releasing drops a counted lease from the held set and returns its
// counter, whose leases key Release removes it from; nil for a lease not
// counted in Redis (nothing to remove).
func (l *Leases) releasing(lease Lease) *counter {
	if !lease.counted {
		return nil
	}
	l.mu.Lock()
	delete(l.held, lease.ID)
	l.mu.Unlock()
	return l.counterOf(lease.Provider, lease.Kind) // nil: not configured here, so never counted in Redis by this process
}

// Held returns the counted leases this process holds, in no order.
func (l *Leases) Held() []Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Lease, 0, len(l.held))
	for _, h := range l.held {
		out = append(out, h)
	}
	return out
}

// Restore rebuilds a lease that a holder outside this process sends back
// (the HTTP API's clients): lease as sent, counted as the holder says it
// was granted. A lease claiming to be counted for a provider/kind with no
// configured limit cannot be in Redis, so it is restored uncounted. The
// lease is not added to Held.
func (l *Leases) Restore(lease Lease, counted bool) Lease {
	if l.counterOf(lease.Provider, lease.Kind) == nil {
		counted = false
	}
	lease.counted = counted
	return lease
}

// Forget drops a lease from this process's held set (see Held), so that
// its Heartbeat no longer refreshes it; the lease stays counted in Redis
// until it is released or lapses. The HTTP API calls it for every lease it
// grants: its client holds the lease and refreshes it itself, so a
// Heartbeat here must not keep it alive after the client is gone.
func (l *Leases) Forget(id string) {
	l.mu.Lock()
	delete(l.held, id)
	l.mu.Unlock()
}

// Uncounted returns how many operations went ahead without Redis (fail
// open); grants for unconfigured providers are not included.
func (l *Leases) Uncounted() int64 { return l.fail.Uncounted() }
