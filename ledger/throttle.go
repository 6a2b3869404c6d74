package ledger

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// SourceVendorReset is the Extension.Source of a deadline taken from a
// ThrottleSignal's DeferUntil: the vendor's own reset time.
const SourceVendorReset = "vendor-reset"

// ThrottleSignal is what one throttled answer (a speech vendor's or a CRM's)
// says about when to try again, as its adapter read it. jobs and outbox each
// build one from their own result and hand it to ThrottlePolicy.Decide or
// Ledger.ScopeDeferralFromSignal, so both turn throttling into a scope
// deadline the same way.
type ThrottleSignal struct {
	// Scope is the throttling scope the answer came from. Required by
	// ScopeDeferralFromSignal.
	Scope string
	// Class is the answer's response class (for example "rate_limited"),
	// carried for the caller's record and logs; the policy does not
	// branch on it.
	Class string
	// RetryAfter is the raw Retry-After header exactly as received; nil
	// when the answer had none.
	RetryAfter *string
	// Date is the raw Date header of the same answer exactly as received;
	// nil when the answer had none. An HTTP-date RetryAfter is measured
	// against it when it is a valid HTTP-date, so that the delay is what
	// the vendor asked whatever the host's clock says, and against
	// RetryAfter.Clock otherwise (retryafter.Policy.DecideFor).
	Date *string
	// VendorDelay is a delay the adapter parsed from the vendor's own
	// header; nil when there was none or it did not parse. When set it is
	// preferred to RetryAfter.
	VendorDelay *time.Duration
	// VendorDelayHeader names the vendor's own header and VendorDelayRaw is
	// its raw value, set even when it did not parse ("" when none). Without
	// a Retry-After, "header: raw" is what the history records as the raw
	// timing header.
	VendorDelayHeader string
	VendorDelayRaw    string
	// DeferUntil is an absolute deadline the vendor implies (for example a
	// daily limit that resets at midnight); nil when none. It becomes the
	// offered deadline when it is later than the one decided from the
	// headers (Source SourceVendorReset).
	DeferUntil *time.Time
	// DeferReason, when not empty, replaces the offer's reason (it says
	// where DeferUntil comes from).
	DeferReason string
	// Attempt counts earlier tries of the throttled work from 0; it sizes
	// the fallback backoff (retryafter.Policy.Decide's attempt).
	Attempt int
	// JobID is the River job whose request was throttled; 0 if none.
	JobID int64
	// RecordingID is the recording whose request was throttled; uuid.Nil
	// if none.
	RecordingID uuid.UUID
}

// ThrottlePolicy turns a ThrottleSignal into an offer of a scope deadline.
// The zero value uses retryafter's defaults and enforces the deadline.
type ThrottlePolicy struct {
	// RetryAfter decides the delay from the signal's timing headers.
	RetryAfter retryafter.Policy
	// ObserveOnly: the scope runs in observe-only mode: the offer is
	// recorded (its reason prefixed "observe-only: ") but the scope's
	// deadline does not move, and the throttled work backs off alone as if
	// it had no timing header.
	ObserveOnly bool
}

// ThrottleDecision is what ThrottlePolicy decided for one signal.
type ThrottleDecision struct {
	// Decision is the timing decision taken from the headers: the vendor's
	// own delay when the signal has one, else Retry-After, else backoff.
	Decision retryafter.Decision
	// Extension is the offer to the scope: Decision's deadline, or
	// DeferUntil when later; its RetryAfter is the raw header to record.
	Extension Extension
	// Backoff is, in observe-only mode, when the throttled work alone may
	// try again (a fallback backoff sized by Attempt); zero otherwise.
	Backoff time.Time
}

// Decide applies p to s. It stores nothing; its only inputs besides s are
// p.RetryAfter's clock and jitter.
func (p ThrottlePolicy) Decide(s ThrottleSignal) ThrottleDecision {
	var d retryafter.Decision
	if s.VendorDelay != nil {
		d = p.RetryAfter.DecideDelay(*s.VendorDelay, s.VendorDelayRaw, s.Attempt)
	} else {
		raw, date := "", ""
		if s.RetryAfter != nil {
			raw = *s.RetryAfter
		}
		if s.Date != nil {
			date = *s.Date
		}
		d = p.RetryAfter.DecideFor(raw, s.RetryAfter != nil, date, s.Attempt)
	}
	ext := DecisionExtension(s.Scope, d)
	ext.JobID, ext.RecordingID = s.JobID, s.RecordingID
	if s.RetryAfter == nil && s.VendorDelayHeader != "" {
		raw := s.VendorDelayHeader + ": " + s.VendorDelayRaw
		ext.RetryAfter = &raw
	}
	if s.DeferReason != "" {
		ext.Reason = s.DeferReason
	}
	if s.DeferUntil != nil && s.DeferUntil.After(d.NotBefore) {
		ext.NotBefore, ext.Source = *s.DeferUntil, SourceVendorReset
	}
	out := ThrottleDecision{Decision: d, Extension: ext}
	if p.ObserveOnly {
		out.Extension.Reason = "observe-only: " + ext.Reason
		out.Backoff = p.RetryAfter.Decide("", false, s.Attempt).NotBefore
	}
	return out
}

// ThrottleResult is what ScopeDeferralFromSignal did.
type ThrottleResult struct {
	ThrottleDecision
	// NotBefore is when the throttled work may try again: the scope's
	// deadline after the offer (the later of the stored one and the
	// offer), or in observe-only mode the work's own Backoff.
	NotBefore time.Time
	// Scope is the scope after the offer; zero in observe-only mode.
	Scope ExtendResult
}

// ScopeDeferralFromSignal decides the deadline a throttled answer asks for
// (ThrottlePolicy.Decide) and records it: the scope's deadline moves to it
// unless it already is later (ScopeDeferralExtend), or, in observe-only
// mode, the offer is only recorded (ScopeDeferralObserve).
func (l *Ledger) ScopeDeferralFromSignal(ctx context.Context, p ThrottlePolicy, s ThrottleSignal) (ThrottleResult, error) {
	return l.scopeDeferralFromSignal(ctx, l.pool, p, s)
}

// ScopeDeferralFromSignalTx is ScopeDeferralFromSignal inside the caller's
// transaction.
func (l *Ledger) ScopeDeferralFromSignalTx(ctx context.Context, tx pgx.Tx, p ThrottlePolicy, s ThrottleSignal) (ThrottleResult, error) {
	return l.scopeDeferralFromSignal(ctx, tx, p, s)
}

func (l *Ledger) scopeDeferralFromSignal(ctx context.Context, db dbsqlc.DBTX, p ThrottlePolicy, s ThrottleSignal) (ThrottleResult, error) {
	if s.Scope == "" {
		return ThrottleResult{}, &InvalidError{Field: "Scope", Reason: "is required"}
	}
	res := ThrottleResult{ThrottleDecision: p.Decide(s)}
	if p.ObserveOnly {
		if err := l.scopeDeferralObserve(ctx, db, res.Extension); err != nil {
			return ThrottleResult{}, err
		}
		res.NotBefore = res.Backoff
		return res, nil
	}
	ext, err := l.scopeDeferralExtend(ctx, db, res.Extension)
	if err != nil {
		return ThrottleResult{}, err
	}
	res.Scope, res.NotBefore = ext, ext.NotBefore
	return res, nil
}
