package live

import (
	"context"
	"fmt"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/lane"
)

// CallProviders are the vendors an agent's live call may use, in order of
// preference.
type CallProviders struct {
	// STT lists transcriber providers: the primary first, then fallbacks.
	STT []string
	// TTS lists voice providers: the primary first, then fallbacks.
	TTS []string
}

// TranscriberSlot is a call's one transcriber stream.
type TranscriberSlot struct {
	// Provider is the transcriber the call connects to. "" only when the
	// call listed no STT provider.
	Provider string
	// Lease is the slot held, KindSTT, Holder the call id. It is the zero
	// (refused) Lease when OverLimit.
	Lease capacity.Lease
	// OverLimit says every listed provider was full and the call connects
	// to the primary anyway, holding no lease: it is not counted, so the
	// lease set never goes above a limit, and the vendor may refuse it.
	OverLimit bool
	// FellBack says the primary was full and Provider is a fallback, which
	// is the call's transcriber for its whole length.
	FellBack bool
}

// ConnectTranscriber takes one transcriber slot of leases (KindSTT, Live
// lane, Holder callID) for a live call. It tries p.STT in order, the
// primary first; the first with room becomes the call's transcriber
// (FellBack if not the primary). If none has room the call connects to the
// primary anyway, flagged OverLimit and holding no lease: an agent that
// might be refused beats one that certainly cannot hear. Like
// Leases.Acquire it never fails (Redis down: the primary is granted
// uncounted) and ignores ctx's cancellation. With no STT provider listed it
// returns the zero TranscriberSlot.
//
// Release the slot at hang-up with HangUp.
func ConnectTranscriber(ctx context.Context, leases *capacity.Leases, callID string, p CallProviders) TranscriberSlot {
	return ConnectTranscriberWithTimeline(ctx, leases, nil, callID, p)
}

// ConnectTranscriberWithTimeline is ConnectTranscriber that also records a
// fallback (EventTranscriberFallback) or an over-limit connection
// (EventOverLimitConnect) on the call's timeline tl (nil: none).
func ConnectTranscriberWithTimeline(ctx context.Context, leases *capacity.Leases, tl *Timeline, callID string, p CallProviders) TranscriberSlot {
	if len(p.STT) == 0 {
		return TranscriberSlot{}
	}
	if slot, ok := tryTranscriber(ctx, leases, callID, p.STT); ok {
		if slot.FellBack {
			tl.Record(ctx, TimelineEvent{CallID: callID, Kind: EventTranscriberFallback, Provider: slot.Provider,
				Detail: fmt.Sprintf("transcriber %s full: the call connected to fallback %s", p.STT[0], slot.Provider)})
		}
		return slot
	}
	detail := fmt.Sprintf("a call connected over the limit: all %d STT providers full, the primary taken uncounted", len(p.STT))
	leases.RecordWarning(ctx, capacity.Warning{Kind: capacity.WarningOverLimitConnect, Subject: p.STT[0] + "/" + capacity.KindSTT, Detail: detail})
	tl.Record(ctx, TimelineEvent{CallID: callID, Kind: EventOverLimitConnect, Provider: p.STT[0], Detail: detail})
	return TranscriberSlot{Provider: p.STT[0], OverLimit: true}
}

// tryTranscriber takes the first STT slot with room among providers, in
// order, and reports false if none had room.
func tryTranscriber(ctx context.Context, leases *capacity.Leases, callID string, providers []string) (TranscriberSlot, bool) {
	for i, provider := range providers {
		lease, g := leases.Acquire(ctx, capacity.Request{Provider: provider, Kind: capacity.KindSTT, Holder: callID, Lane: lane.Live})
		if g.Granted {
			return TranscriberSlot{Provider: provider, Lease: lease, FellBack: i > 0}, true
		}
	}
	return TranscriberSlot{}, false
}

// HangUp releases the call's transcriber slot to leases. It is idempotent,
// and a no-op for an OverLimit slot (which holds no lease).
func HangUp(ctx context.Context, leases *capacity.Leases, slot TranscriberSlot) {
	leases.Release(ctx, slot.Lease)
}
