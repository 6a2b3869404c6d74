package live

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/lane"
)

// Defaults of VoiceOptions' zero fields.
const (
	VoiceWaitDefault = 1500 * time.Millisecond
	VoicePollDefault = 100 * time.Millisecond
)

// Kinds of call timeline event.
const (
	// EventVoiceOverflow: the primary voice was full and a reply spoke
	// through a fallback voice (From the primary, To the fallback).
	EventVoiceOverflow = "voice_overflow"
	// EventVoiceOverLimit: every voice stayed full for VoiceOptions.Wait
	// and a reply went ahead on the full primary without a lease (From and
	// To the primary).
	EventVoiceOverLimit = "voice_over_limit"
)

// Event is a warning on a call's timeline.
type Event struct {
	At     time.Time
	CallID string
	Kind   string // EventVoiceOverflow or EventVoiceOverLimit
	From   string // the provider the reply should have used
	To     string // the provider it used
	// Message is for operators reading the timeline.
	Message string
}

// VoiceOptions configures NewVoice.
type VoiceOptions struct {
	// Wait is how long StartReply waits for a slot when every voice is
	// full before going ahead over the limit. Default 0: VoiceWaitDefault
	// (1.5s); negative: do not wait.
	Wait time.Duration
	// Poll is how often StartReply asks again while waiting. Default 0 (or
	// negative): VoicePollDefault (100ms).
	Poll time.Duration
	// OnOverflow receives each warning event (EventVoiceOverflow and
	// EventVoiceOverLimit) as it is appended to the timeline, from the
	// goroutine calling StartReply. Default nil: the events are only kept
	// in Timeline.
	OnOverflow func(Event)
	// Clock stamps events. Default nil: clock.System.
	Clock clock.Clock
	// Timeline, when set, also records every warning event and every
	// wait (EventVoiceWait) in Redis, on the call's shared timeline, and
	// the fallbacks the call has connected to: a Voice made for each reply
	// (as the capacity API does) starts with the call's connected
	// fallbacks. Default nil: the events and the connected fallbacks are
	// kept only in this Voice.
	Timeline *Timeline
}

// WithDefaults returns a copy of o with each zero field set to its default.
func (o VoiceOptions) WithDefaults() VoiceOptions {
	if o.Wait == 0 {
		o.Wait = VoiceWaitDefault
	}
	if o.Poll <= 0 {
		o.Poll = VoicePollDefault
	}
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	return o
}

// Voice is one live call's speech synthesis: one voice slot (KindTTS, Live
// lane, Holder the call id) per reply, taken when the reply starts
// speaking and released when its audio has all arrived or it is cut off.
// It is safe for concurrent use.
type Voice struct {
	leases    *capacity.Leases
	callID    string
	providers []string
	opts      VoiceOptions

	mu        sync.Mutex
	connected []string // fallbacks opened, in order
	timeline  []Event
}

// NewVoice returns the voice of call callID. providers lists the voice
// providers, the primary first, then fallbacks.
func NewVoice(leases *capacity.Leases, callID string, providers []string, opts VoiceOptions) *Voice {
	return &Voice{leases: leases, callID: callID, providers: slices.Clone(providers), opts: opts.WithDefaults()}
}

// connectedOrder returns the fallbacks already connected, in the order
// they were opened: this Voice's, after those its Timeline holds for the
// call (read once per reply).
func (v *Voice) connectedOrder(ctx context.Context) []string {
	var out []string
	for _, p := range v.opts.Timeline.ConnectedVoices(ctx, v.callID) {
		if slices.Contains(v.providers[1:], p) {
			out = append(out, p)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range v.connected {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Reply is one reply's voice slot. Call Done when the reply's audio has
// all arrived or it is cut off.
type Reply struct {
	// Provider is the voice the reply speaks through. "" only when the
	// voice has no provider.
	Provider string
	// Lease is the slot held; the zero Lease when OverLimit.
	Lease capacity.Lease
	// Overflowed says the primary was full and Provider is a fallback.
	Overflowed bool
	// OverLimit says every voice stayed full for the wait and the reply
	// goes ahead on the primary holding no lease (not counted).
	OverLimit bool
	// Waited is how long the reply waited for a slot because every voice
	// was full; 0 when one had room at once.
	Waited time.Duration

	leases *capacity.Leases
	once   *sync.Once
}

// Done releases the reply's slot. It is idempotent and safe on the zero
// Reply.
func (r Reply) Done() {
	if r.once == nil {
		return
	}
	r.once.Do(func() { r.leases.Release(context.Background(), r.Lease) })
}

// StartReply takes a voice slot for a reply about to speak. It tries the
// primary, then the fallbacks already connected (in the order they were
// opened), then the others in the configured order; a fallback used for
// the first time is connected and kept for later overflows (Connected).
// Speaking through a fallback appends an EventVoiceOverflow to the
// timeline. If none has room it asks again every Poll for up to Wait,
// then goes ahead on the primary, OverLimit, holding no lease, and appends
// an EventVoiceOverLimit. If ctx ends during the wait it goes ahead
// over-limit at once. Like Leases.Acquire it never fails (Redis down: the
// primary is granted uncounted).
func (v *Voice) StartReply(ctx context.Context) Reply {
	if len(v.providers) == 0 {
		return Reply{}
	}
	primary := v.providers[0]
	connected := v.connectedOrder(ctx)
	if r, ok := v.try(ctx, connected); ok {
		return r
	}
	start := time.Now()
	if v.opts.Wait > 0 {
		deadline := time.NewTimer(v.opts.Wait)
		defer deadline.Stop()
		poll := time.NewTicker(v.opts.Poll)
		defer poll.Stop()
	wait:
		for {
			select {
			case <-ctx.Done():
				break wait
			case <-deadline.C:
				// One last look, so a slot freed just now is not missed.
				if r, ok := v.try(ctx, connected); ok {
					return v.waited(ctx, r, start)
				}
				break wait
			case <-poll.C:
				if r, ok := v.try(ctx, connected); ok {
					return v.waited(ctx, r, start)
				}
			}
		}
	}
	r := v.waited(ctx, Reply{Provider: primary, OverLimit: true}, start)
	v.warn(ctx, Event{Kind: EventVoiceOverLimit, From: primary, To: primary,
		Message: fmt.Sprintf("every voice (%v) full for %s: reply goes ahead on %s over the limit", v.providers, r.Waited.Round(time.Millisecond), primary)})
	return r
}

// waited stamps r with the wait since start and records it on the shared
// timeline.
func (v *Voice) waited(ctx context.Context, r Reply, start time.Time) Reply {
	r.Waited = time.Since(start)
	outcome := "got a slot of " + r.Provider
	if r.OverLimit {
		outcome = "went ahead over the limit"
	}
	v.opts.Timeline.Record(ctx, TimelineEvent{CallID: v.callID, Kind: EventVoiceWait, Provider: r.Provider,
		Detail: fmt.Sprintf("every voice full: reply waited %d ms, then %s", r.Waited.Milliseconds(), outcome)})
	return r
}

// try takes the first voice slot with room, in StartReply's order: the
// primary, the connected fallbacks, then the others.
func (v *Voice) try(ctx context.Context, connected []string) (Reply, bool) {
	primary := v.providers[0]
	order := append([]string{primary}, connected...)
	for _, p := range v.providers[1:] {
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
	}
	for _, provider := range order {
		lease, g := v.leases.Acquire(ctx, capacity.Request{Provider: provider, Kind: capacity.KindTTS, Holder: v.callID, Lane: lane.Live})
		if !g.Granted {
			continue
		}
		r := Reply{Provider: provider, Lease: lease, leases: v.leases, once: new(sync.Once)}
		if provider != primary {
			r.Overflowed = true
			v.mu.Lock()
			if !slices.Contains(v.connected, provider) {
				v.connected = append(v.connected, provider)
			}
			v.mu.Unlock()
			v.opts.Timeline.ConnectVoice(ctx, v.callID, provider)
			v.warn(ctx, Event{Kind: EventVoiceOverflow, From: primary, To: provider,
				Message: fmt.Sprintf("voice %s full: reply moved to fallback %s", primary, provider)})
		}
		return r, true
	}
	return Reply{}, false
}

func (v *Voice) warn(ctx context.Context, e Event) {
	e.At, e.CallID = v.opts.Clock.Now(), v.callID
	v.opts.Timeline.Record(ctx, TimelineEvent{CallID: v.callID, Kind: e.Kind, Provider: e.To, Detail: e.Message})
	v.mu.Lock()
	v.timeline = append(v.timeline, e)
	v.mu.Unlock()
	if v.opts.OnOverflow != nil {
		v.opts.OnOverflow(e)
	}
}

// Connected returns the fallback voices this Voice has connected to, in
// the order they were opened. The primary is not listed.
func (v *Voice) Connected() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.connected)
}

// Timeline returns the call's warning events so far, oldest first.
func (v *Voice) Timeline() []Event {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.timeline)
}
