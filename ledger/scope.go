package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// Deferral is the shared "not before" of one throttling scope (a provider
// account and model class, per tenant where tenants bring their own keys).
type Deferral struct {
	Scope string `json:"scope"`
	// NotBefore: no new work is admitted to the scope before it. Zero when
	// the scope was never deferred.
	NotBefore time.Time `json:"not_before"`
	UpdatedAt time.Time `json:"updated_at"`
	// NeedsProbe: a cooldown ended (or will): the next request must be a
	// single probe, and the rest wait until it succeeds.
	NeedsProbe bool `json:"needs_probe"`
	// ProbeJobID holds the probe when one is out; ProbeClaimedAt since when.
	ProbeJobID     int64     `json:"probe_job_id"`
	ProbeClaimedAt time.Time `json:"probe_claimed_at"`
	// Paused: an operator must resume the scope (for example, the vendor
	// account's quota is exhausted). Jobs wait; they do not fail.
	Paused       bool      `json:"paused"`
	PausedReason string    `json:"paused_reason"`
	PausedAt     time.Time `json:"paused_at"`
	// Seq is the sequence number of the scope's latest offer (extension or
	// observe-only offer); 0 when it had none.
	Seq int64 `json:"seq"`
}

// Open reports whether the scope admits any request at now: not paused,
// not deferred, no probe needed.
func (d Deferral) Open(now time.Time) bool { return !d.Paused && !d.NeedsProbe && !d.Active(now) }

// Active reports whether the scope is still deferred at now.
func (d Deferral) Active(now time.Time) bool { return now.Before(d.NotBefore) }

// Extension offers a new deadline for a scope, with what caused it.
type Extension struct {
	// Scope: required.
	Scope string
	// NotBefore is the offered deadline. The stored deadline becomes the
	// later of it and the current one: it never moves backward.
	NotBefore time.Time
	// RetryAfter is the raw timing header exactly as received; nil if none.
	RetryAfter *string
	// Source says where the deadline came from ("retry-after",
	// "backoff", a vendor header name, ...).
	Source string
	// Clamped records that the header asked for more than the configured
	// maximum and was cut down to it.
	Clamped bool
	// JobID is the River job that caused it; 0 if none.
	JobID int64
	// RecordingID is the recording whose request was throttled; uuid.Nil if none.
	RecordingID uuid.UUID
	// Reason is free text for a person.
	Reason string
}

// ExtendResult is a scope's deadline after an extension.
type ExtendResult struct {
	Deferral
	// Moved is true when the offer became the deadline (it was the latest).
	Moved bool
}

// ScopeDeferralExtend offers a deadline to a scope and records the offer, in
// one statement: the deadline becomes GREATEST(current, offered).
func (l *Ledger) ScopeDeferralExtend(ctx context.Context, e Extension) (ExtendResult, error) {
	return l.scopeDeferralExtend(ctx, l.pool, e)
}

// ScopeDeferralExtendTx is ScopeDeferralExtend inside the caller's transaction.
func (l *Ledger) ScopeDeferralExtendTx(ctx context.Context, tx pgx.Tx, e Extension) (ExtendResult, error) {
	return l.scopeDeferralExtend(ctx, tx, e)
}

func (l *Ledger) scopeDeferralExtend(ctx context.Context, db dbsqlc.DBTX, e Extension) (ExtendResult, error) {
	if e.Scope == "" {
		return ExtendResult{}, &InvalidError{Field: "Scope", Reason: "is required"}
	}
	if e.NotBefore.IsZero() {
		return ExtendResult{}, &InvalidError{Field: "NotBefore", Reason: "is required"}
	}
	offered := pgtime.Write(e.NotBefore)
	row, err := l.queries.ScopeDeferralExtend(ctx, db, dbsqlc.ScopeDeferralExtendParams{
		Scope: e.Scope, OfferedNotBefore: offered, At: l.now(), RetryAfterRaw: e.RetryAfter, Source: e.Source,
		Clamped: e.Clamped, JobID: nonZero(e.JobID), RecordingID: nonZero(e.RecordingID), Reason: e.Reason,
	})
	if err != nil {
		return ExtendResult{}, fmt.Errorf("extending scope deferral %s: %w", e.Scope, translate(err))
	}
	d := Deferral{Scope: row.Scope, NotBefore: row.NotBefore.UTC(), UpdatedAt: row.UpdatedAt.UTC(), Seq: row.Seq}
	return ExtendResult{Deferral: d, Moved: d.NotBefore.Equal(offered)}, nil
}

// ScopeDeferral returns a scope's current deadline. A scope never deferred
// has a zero NotBefore (and no error).
func (l *Ledger) ScopeDeferral(ctx context.Context, scope string) (Deferral, error) {
	row, err := l.queries.ScopeDeferralGet(ctx, l.pool, scope)
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return Deferral{Scope: scope}, nil
	}
	if err != nil {
		return Deferral{}, fmt.Errorf("reading scope deferral %s: %w", scope, err)
	}
	return deferralFrom(row), nil
}

// ScopeDeferrals lists every scope that was ever deferred or paused.
func (l *Ledger) ScopeDeferrals(ctx context.Context) ([]Deferral, error) {
	rows, err := l.queries.ScopeDeferralList(ctx, l.pool)
	if err != nil {
		return nil, fmt.Errorf("listing scope deferrals: %w", translate(err))
	}
	out := make([]Deferral, len(rows))
	for i, r := range rows {
		out[i] = deferralFrom(r)
	}
	return out, nil
}

// deferralFrom converts a scope_deferrals row.
func deferralFrom(r dbsqlc.ScopeDeferral) Deferral {
	d := Deferral{
		Scope: r.Scope, NotBefore: r.NotBefore.UTC(), UpdatedAt: r.UpdatedAt.UTC(), NeedsProbe: r.NeedsProbe,
		ProbeJobID: deref(r.ProbeJobID), ProbeClaimedAt: pgtime.Read(r.ProbeClaimedAt),
		Paused: r.Paused, PausedReason: r.PausedReason, PausedAt: pgtime.Read(r.PausedAt), Seq: r.Seq,
	}
	if d.NotBefore.Equal(time.Unix(0, 0)) {
		d.NotBefore = time.Time{} // a row made by an admission check: never deferred
	}
	return d
}

// ExtensionRecord is one recorded offer, as stored.
type ExtensionRecord struct {
	ID    int64
	Scope string
	// Seq is the offer's sequence number in its scope: an admission that
	// read a scope's Seq n knew exactly the offers numbered up to n.
	Seq                int64
	OfferedNotBefore   time.Time
	ResultingNotBefore time.Time
	RetryAfter         *string
	Source             string
	Clamped            bool
	JobID              int64
	RecordingID        uuid.UUID
	Reason             string
	At                 time.Time
	// ObserveOnly: recorded by a scope in observe-only mode; it did not
	// move the deadline.
	ObserveOnly bool
	// RecordedAt: the database's clock when the offer was written (an
	// in-flight submission was sent after it; ledger.SubmissionChecks).
	RecordedAt time.Time
}

// ScopeDeferralExtensions returns every offer recorded for a scope, oldest first.
func (l *Ledger) ScopeDeferralExtensions(ctx context.Context, scope string) ([]ExtensionRecord, error) {
	rows, err := l.queries.ScopeDeferralExtensionList(ctx, l.pool, scope)
	if err != nil {
		return nil, fmt.Errorf("reading extensions of scope %s: %w", scope, translate(err))
	}
	out := make([]ExtensionRecord, len(rows))
	for i, r := range rows {
		out[i] = ExtensionRecord{
			ID: r.ID, Scope: r.Scope, OfferedNotBefore: r.OfferedNotBefore.UTC(), ResultingNotBefore: r.ResultingNotBefore.UTC(),
			RetryAfter: r.RetryAfterRaw, Source: r.Source, Clamped: r.Clamped, JobID: deref(r.JobID),
			RecordingID: deref(r.RecordingID), Reason: r.Reason, At: r.At.UTC(), ObserveOnly: r.ObserveOnly,
			RecordedAt: r.RecordedAt.UTC(), Seq: r.Seq,
		}
	}
	return out, nil
}

// DecisionExtension is the Extension that records a timing decision for
// scope: its deadline, the raw header when there was one, where the deadline
// came from, whether it was clamped, and why a header was not used.
func DecisionExtension(scope string, d retryafter.Decision) Extension {
	e := Extension{
		Scope:     scope,
		NotBefore: d.NotBefore,
		Source:    string(d.Source),
		Clamped:   d.Clamped,
	}
	if d.Present {
		raw := d.Raw
		e.RetryAfter = &raw
	}
	switch {
	case d.Clamped:
		e.Reason = fmt.Sprintf("asked for %s, clamped to %s", d.Requested, d.Delay)
	case d.Fallback != retryafter.FallbackNone:
		e.Reason = fmt.Sprintf("backoff: Retry-After %s (attempt %d)", d.Fallback, d.Attempt)
	}
	return e
}
