package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// Defaults of TimelineConfig's zero fields.
const (
	// TimelineMaxLenDefault is about how many events a call's timeline
	// keeps (Redis trims a stream in whole nodes, so a few more may stay).
	TimelineMaxLenDefault = 256
	// TimelineTTLDefault is how long a call's timeline lives after its
	// last event.
	TimelineTTLDefault = 24 * time.Hour
	// TimelineRecentDefault is about how many events of every call the
	// recent list (Recent, the status page) keeps.
	TimelineRecentDefault = 200
)

// Kinds of timeline event besides EventVoiceOverflow and
// EventVoiceOverLimit.
const (
	// EventOverLimitConnect: every transcriber was full; the call
	// connected to its primary uncounted.
	EventOverLimitConnect = "over_limit_connect"
	// EventTranscriberFallback: the primary transcriber was full; the call
	// connected to a fallback (Provider).
	EventTranscriberFallback = "transcriber_fallback"
	// EventVoiceWait: every voice was full and a reply waited (Detail says
	// how long) before it got a slot or went ahead over the limit.
	EventVoiceWait = "voice_wait"
	// EventDialQueued: an outbound call found no room and waits in the
	// dial queue (Detail says what for).
	EventDialQueued = "dial_queued"
	// EventDialReserved: the call's transcriber (Provider) was reserved;
	// it may be dialled.
	EventDialReserved = "dial_reserved"
	// EventAnswered: the dialled call was answered; the reservation was
	// handed over to it.
	EventAnswered = "answered"
	// EventUnansweredEnd: the call ended before it was answered; its
	// reservation was given back.
	EventUnansweredEnd = "unanswered_end"
	// EventDialCancelled: the call ended while queued.
	EventDialCancelled = "dial_cancelled"
	// EventCallEnded: an answered call ended; its transcriber was released.
	EventCallEnded = "call_ended"
)

// TimelineEvent is one event of a call's timeline.
type TimelineEvent struct {
	// At is Redis's time when the event was recorded (the stream entry's
	// id); the zero time when it could not be recorded.
	At       time.Time
	CallID   string
	Kind     string
	Provider string // "" when no provider is concerned
	Detail   string // for operators
}

// TimelineConfig configures NewTimeline.
type TimelineConfig struct {
	// MaxLen is about how many events one call keeps. Default 0:
	// TimelineMaxLenDefault (256).
	MaxLen int
	// TTL is how long a call's timeline lives after its last event.
	// Default 0: TimelineTTLDefault (24h).
	TTL time.Duration
	// Recent is about how many events of all calls Recent keeps. Default
	// 0: TimelineRecentDefault (200).
	Recent int
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c TimelineConfig) WithDefaults() TimelineConfig {
	c.MaxLen = cmp.Or(c.MaxLen, TimelineMaxLenDefault)
	c.TTL = cmp.Or(c.TTL, TimelineTTLDefault)
	c.Recent = cmp.Or(c.Recent, TimelineRecentDefault)
	return c
}

// Timeline stores each live call's events in Redis, shared by every
// process: a stream per call (key prefix:{call:id}:timeline, so one
// call's keys share a cluster slot), trimmed to about
// MaxLen events and expiring TTL after its last event, plus one bounded
// stream of recent events of all calls. A nil *Timeline records nothing.
// It is safe for concurrent use.
type Timeline struct {
	kit  rediskit.Kit
	cfg  TimelineConfig
	fail *rediskit.FailOpen
}

// NewTimeline returns a Timeline in r, or an error naming the field cfg
// gets wrong.
func NewTimeline(r *capacity.Redis, cfg TimelineConfig) (*Timeline, error) {
	if r == nil {
		return nil, errors.New("live.NewTimeline: Redis is nil")
	}
	cfg = cfg.WithDefaults()
	switch {
	case cfg.MaxLen < 0:
		return nil, fmt.Errorf("TimelineConfig.MaxLen must not be negative, got %d", cfg.MaxLen)
	case cfg.Recent < 0:
		return nil, fmt.Errorf("TimelineConfig.Recent must not be negative, got %d", cfg.Recent)
	case cfg.TTL < 0:
		return nil, fmt.Errorf("TimelineConfig.TTL must not be negative, got %s", cfg.TTL)
	}
	kit := r.Kit()
	return &Timeline{kit: kit, cfg: cfg, fail: kit.NewFailOpen()}, nil
}

func (t *Timeline) key(callID string) string { return t.kit.Key("call:"+callID, "timeline") }
func (t *Timeline) recentKey() string        { return t.kit.Key("timeline", "recent") }

// Record appends e to its call's timeline (e.CallID) and to the recent
// events, stamped with Redis's time (e.At is ignored). Like every capacity
// call it fails open: without Redis the event is lost and a warning is
// logged at most once per interval. ctx's cancellation is ignored.
func (t *Timeline) Record(ctx context.Context, e TimelineEvent) {
	if t == nil || e.CallID == "" {
		return
	}
	octx, cancel := t.kit.Detached(ctx)
	defer cancel()
	fields := []any{"kind", e.Kind, "provider", e.Provider, "detail", e.Detail}
	key := t.key(e.CallID)
	pipe := t.kit.Client.TxPipeline()
	add := pipe.XAdd(octx, &redis.XAddArgs{Stream: key, MaxLen: int64(t.cfg.MaxLen), Approx: true, Values: fields})
	pipe.PExpire(octx, key, t.cfg.TTL)
	if _, err := pipe.Exec(octx); err != nil {
		t.fail.Note("timeline record", err)
		return
	}
	// The recent stream has its own hash tag: a second round trip, with
	// the call's entry id, so both show the same time.
	err := t.kit.Client.XAdd(octx, &redis.XAddArgs{Stream: t.recentKey(), MaxLen: int64(t.cfg.Recent), Approx: true,
		Values: append(fields, "call_id", e.CallID, "at", add.Val())}).Err()
	if err == nil {
		err = t.kit.Client.PExpire(octx, t.recentKey(), t.cfg.TTL).Err()
	}
	if err != nil {
		t.fail.Note("timeline recent", err)
	}
}

func (t *Timeline) voicesKey(callID string) string { return t.kit.Key("call:"+callID, "voices") }

// ConnectVoice records that callID's replies have spoken through the
// fallback voice provider, so that later replies of the call, from any
// process, try it before the fallbacks not yet connected. The record lives
// as long as the call's timeline. It fails open as Record does.
func (t *Timeline) ConnectVoice(ctx context.Context, callID, provider string) {
	if t == nil || callID == "" || provider == "" {
		return
	}
	octx, cancel := t.kit.Detached(ctx)
	defer cancel()
	key := t.voicesKey(callID)
	pipe := t.kit.Client.TxPipeline()
	// The first connection orders the fallbacks (NX: a later one keeps
	// its place).
	pipe.ZAddArgs(octx, key, redis.ZAddArgs{NX: true, Members: []redis.Z{{Score: float64(time.Now().UnixMilli()), Member: provider}}})
	pipe.PExpire(octx, key, t.cfg.TTL)
	if _, err := pipe.Exec(octx); err != nil {
		t.fail.Note("timeline connect voice", err)
	}
}

// ConnectedVoices returns the fallback voices callID's replies have
// connected to (ConnectVoice), in the order they were first used; none
// for a call that has used none, or when Redis cannot be read (a reply
// then tries the fallbacks in their configured order).
func (t *Timeline) ConnectedVoices(ctx context.Context, callID string) []string {
	if t == nil || callID == "" {
		return nil
	}
	octx, cancel := t.kit.Op(ctx)
	defer cancel()
	vs, err := t.kit.Client.ZRange(octx, t.voicesKey(callID), 0, -1).Result()
	if err != nil {
		t.fail.Note("timeline connected voices", err)
		return nil
	}
	return vs
}

// Events returns callID's timeline, oldest first; none for a call with no
// events (or whose timeline expired). It returns Redis's error: it is an
// operator's read, not a call's.
func (t *Timeline) Events(ctx context.Context, callID string) ([]TimelineEvent, error) {
	octx, cancel := t.kit.Detached(ctx)
	defer cancel()
	msgs, err := t.kit.Client.XRange(octx, t.key(callID), "-", "+").Result()
	if err != nil {
		return nil, fmt.Errorf("reading the timeline of call %s: %w", callID, err)
	}
	out := make([]TimelineEvent, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, eventOf(callID, m.ID, m.Values))
	}
	return out, nil
}

// Recent returns up to n recent events of every call, newest first.
func (t *Timeline) Recent(ctx context.Context, n int) ([]TimelineEvent, error) {
	octx, cancel := t.kit.Detached(ctx)
	defer cancel()
	msgs, err := t.kit.Client.XRevRangeN(octx, t.recentKey(), "+", "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the recent call events: %w", err)
	}
	out := make([]TimelineEvent, 0, len(msgs))
	for _, m := range msgs {
		id, _ := m.Values["at"].(string)
		if id == "" {
			id = m.ID
		}
		callID, _ := m.Values["call_id"].(string)
		out = append(out, eventOf(callID, id, m.Values))
	}
	return out, nil
}

// Uncounted returns how many events could not be recorded (Redis down).
func (t *Timeline) Uncounted() int64 { return t.fail.Uncounted() }

func eventOf(callID, id string, v map[string]any) TimelineEvent {
	e := TimelineEvent{CallID: callID, At: streamTime(id)}
	e.Kind, _ = v["kind"].(string)
	e.Provider, _ = v["provider"].(string)
	e.Detail, _ = v["detail"].(string)
	return e
}

// streamTime is the time of stream entry id "ms-seq", in UTC.
func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}
