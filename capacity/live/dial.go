package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// DialRecheckDefault is how often a Dialer re-checks its queue by default.
const DialRecheckDefault = 10 * time.Second

// Why a queued call is waiting (QueuedCall.WaitingFor).
const (
	// WaitingForCheck: queued, not checked yet.
	WaitingForCheck = "capacity check"
	// WaitingForCapacity: checked, and no voice or no transcriber had
	// room.
	WaitingForCapacity = "provider capacity"
)

// Call is an outbound call waiting to be dialled.
type Call struct {
	ID        string
	Providers CallProviders
}

// QueuedCall is a call in a Dialer's queue and what it waits for.
type QueuedCall struct {
	Call       Call
	WaitingFor string // WaitingForCheck or WaitingForCapacity
}

// Reservation is what TryDial holds for a dialled call until it is
// answered (Answered) or ends unanswered (CallEnded).
type Reservation struct {
	CallID string
	// Transcriber is the transcriber slot reserved under the call's id
	// (never OverLimit: a dial waits instead).
	Transcriber TranscriberSlot
	// Voice is the voice provider found with room, the first in
	// Call.Providers.TTS order; "" when the call lists none.
	Voice string
}

// DialerConfig configures NewDialer.
type DialerConfig struct {
	// Recheck is how often Run re-checks the queue, besides every
	// CallEnded. Default 0: DialRecheckDefault (10s).
	Recheck time.Duration

	// tick replaces the re-check ticker (tests, see dial_export_test.go).
	tick <-chan time.Time
}

// Dialer admits queued outbound calls when their providers have room.
// Before a call is dialled, one of its voice providers must have room and
// a transcriber slot is reserved under the call's id. It is safe for
// concurrent use.
type Dialer struct {
	leases *capacity.Leases
	cfg    DialerConfig
	wake   chan struct{} // buffered 1: a re-check is due

	mu    sync.Mutex
	queue []QueuedCall
	held  map[string]TranscriberSlot // by call id: reserved or answered
}

// NewDialer returns a Dialer taking its slots from leases.
func NewDialer(leases *capacity.Leases, cfg DialerConfig) (*Dialer, error) {
	if leases == nil {
		return nil, errors.New("live.NewDialer: Leases is nil")
	}
	if cfg.Recheck < 0 {
		return nil, fmt.Errorf("capacity: DialerConfig.Recheck must not be negative, got %s", cfg.Recheck)
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = DialRecheckDefault
	}
	return &Dialer{leases: leases, cfg: cfg, wake: make(chan struct{}, 1), held: make(map[string]TranscriberSlot)}, nil
}

// TryDial checks whether c can be dialled now and, if so, reserves its
// transcriber slot under c.ID (Live lane, primary then fallbacks) and
// keeps the reservation until Answered or CallEnded.
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
	if !ok {
		return Reservation{}, false
	}
	d.mu.Lock()
	if old, dup := d.held[c.ID]; dup {
		defer HangUp(ctx, d.leases, old) // a second TryDial replaces the first
	}
	d.held[c.ID] = slot
	d.mu.Unlock()
	return Reservation{CallID: c.ID, Transcriber: slot, Voice: voice}, true
}

func (d *Dialer) probeVoice(ctx context.Context, c Call) (string, bool) {
	if len(c.Providers.TTS) == 0 {
		return "", true
	}
	for _, provider := range c.Providers.TTS {
		lease, g := d.leases.Acquire(ctx, capacity.Request{Provider: provider, Kind: capacity.KindTTS, Holder: c.ID + "#probe", Lane: capacity.Live})
		if g.Granted {
			d.leases.Release(ctx, lease)
			return provider, true
		}
	}
	return "", false
}

// Enqueue adds c to the back of the queue and prompts Run to check it.
func (d *Dialer) Enqueue(c Call) {
	d.mu.Lock()
	d.queue = append(d.queue, QueuedCall{Call: c, WaitingFor: WaitingForCheck})
	d.mu.Unlock()
	d.prompt()
}

// Queued returns the calls waiting to be dialled, oldest first.
func (d *Dialer) Queued() []QueuedCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.queue)
}

// Answered hands the call's reservation over to the call: the reserved
// transcriber slot becomes the call's transcriber, released at CallEnded
// (or HangUp; doing both is harmless). It reports false if the Dialer
// holds nothing for callID.
func (d *Dialer) Answered(callID string) (TranscriberSlot, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	slot, ok := d.held[callID]
	return slot, ok
}

// CallEnded is told of every call end, dialled by this Dialer or not. It
// releases what the Dialer holds for callID (a reservation never answered,
// or an answered call's transcriber slot), drops the call from the queue
// if it was still queued, and prompts Run to re-check the queue, since a
// slot may have freed up.
func (d *Dialer) CallEnded(ctx context.Context, callID string) {
	d.mu.Lock()
	slot, ok := d.held[callID]
	delete(d.held, callID)
	d.queue = slices.DeleteFunc(d.queue, func(q QueuedCall) bool { return q.Call.ID == callID })
	d.mu.Unlock()
	if ok {
		HangUp(ctx, d.leases, slot)
	}
	d.prompt()
}

func (d *Dialer) prompt() {
	select {
	case d.wake <- struct{}{}:
	default: // a re-check is already due
	}
}

// Run dials queued calls as room appears: it checks the queue at once,
// every DialerConfig.Recheck, and whenever Enqueue or CallEnded prompts
// it. Each call that passes TryDial leaves the queue and is handed to
// dial, from Run's goroutine: dial should start the call and return. Run
// returns when ctx is done; run one per Dialer.
func (d *Dialer) Run(ctx context.Context, dial func(Call, Reservation)) {
	tick := d.cfg.tick
	if tick == nil {
		ticker := time.NewTicker(d.cfg.Recheck)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		d.recheck(ctx, dial)
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-d.wake:
		}
	}
}

// recheck tries every queued call once, oldest first; calls may differ in
// providers, so one with no room does not stop the next.
func (d *Dialer) recheck(ctx context.Context, dial func(Call, Reservation)) {
	// This pass answers every prompt made so far: prompts coalesce.
	select {
	case <-d.wake:
	default:
	}
	for _, q := range d.Queued() {
		if ctx.Err() != nil {
			return
		}
		res, ok := d.TryDial(ctx, q.Call)
		d.mu.Lock()
		i := slices.IndexFunc(d.queue, func(e QueuedCall) bool { return e.Call.ID == q.Call.ID })
		switch {
		case i < 0 && ok: // ended while being checked: give the slot back
			slot := d.held[q.Call.ID]
			delete(d.held, q.Call.ID)
			d.mu.Unlock()
			HangUp(ctx, d.leases, slot)
			continue
		case i < 0:
		case ok:
			d.queue = slices.Delete(d.queue, i, i+1)
		default:
			d.queue[i].WaitingFor = WaitingForCapacity
		}
		d.mu.Unlock()
		if ok {
			dial(q.Call, res)
		}
	}
}
