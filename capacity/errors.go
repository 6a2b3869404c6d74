package capacity

import "errors"

// The errors capacity returns for the caller's own mistakes and for a
// full or unreachable counter; each error type's Is matches its sentinel.
var (
	// ErrInvalidID is what Slots returns, wrapped in an *IDError, for an
	// organisation, campaign, call or slot id it does not accept.
	ErrInvalidID = errors.New("capacity: invalid id")

	// ErrNoSlot is what Acquire returns, wrapped in a *NoSlotError, when Redis
	// answered that the organisation or the campaign is full.
	ErrNoSlot = errors.New("capacity: no call slot free")

	// ErrAlreadyBound is what Slot.Bind returns when the call is already bound
	// to another live slot; Bind has released the new slot.
	ErrAlreadyBound = errors.New("capacity: call already bound to a slot")

	// ErrSlotNotHeld is what Slot.Bind returns when Redis holds no live slot of
	// that id for the slot's organisation (and campaign): it was never granted,
	// was released, or went stale. Nothing is bound.
	ErrSlotNotHeld = errors.New("capacity: slot not held")

	// ErrNotBound is what Slots.ReleaseCall returns when the organisation has
	// no binding for the call: it was never bound, was released already, went
	// stale, or is another organisation's. Nothing is freed.
	ErrNotBound = errors.New("capacity: call not bound to a slot of the organisation")

	// ErrNoCallerID is what CallerIDs.Acquire returns, wrapped in a
	// *NoCallerIDError, when Redis answered that every number of the
	// organisation's pool is busy (or the pool is empty).
	ErrNoCallerID = errors.New("capacity: no caller ID free")

	// ErrCallerIDsUnavailable is what CallerIDs.Acquire returns when Redis
	// cannot be reached. A caller ID cannot be invented, so unlike slots and
	// leases the pool does not fail open with a grant: the caller dials with
	// its own default number, or retries.
	ErrCallerIDsUnavailable = errors.New("capacity: caller-ID pool unreachable")

	// ErrInvalidNumber is what CheckNumber returns, wrapped in a *NumberError,
	// for a number that is not E.164.
	ErrInvalidNumber = errors.New("capacity: invalid phone number")

	// ErrCallerIDBusy is what CallerIDs.Remove returns, wrapped in a
	// *CallerIDBusyError, when it refuses to remove numbers that are in use.
	ErrCallerIDBusy = errors.New("capacity: caller ID in use")
)
