package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// The exact rule. A cooldown is known to a submission when its offer was
// numbered up to the scope sequence number the submission's admission
// read (admitted_seq); clocks do not enter into it. Then:
//
//   - a submission ignored a known cooldown when a known offer's deadline
//     was after the instant its admission compared deadlines to
//     (admitted_at, on the database's clock): the admission itself was
//     wrong. This must never happen in an enforced scope.
//   - a submission was in flight when an offer numbered after its
//     admitted_seq was recorded before it was sent (sent_at) and asked for
//     a deadline after that: the cooldown was announced while the request
//     was on its way, which nothing can prevent; such submissions are
//     counted apart, with their admission-to-send gap, which stays short
//     because no request is sent long after its admission without asking
//     again.
//
// SubmissionAccounting is the one implementation, in SQL
// (SubmissionChecks); the rollout report, /metrics, the demo, the bench
// and the tests all use it.

// IgnoredListMax bounds CooldownAccounting.Ignored and InFlightList.
const IgnoredListMax = 20

// SubmissionCheck is one submission as the exact rule judges it.
type SubmissionCheck struct {
	RecordingID uuid.UUID `json:"recording_id"`
	TenantID    string    `json:"tenant_id"`
	CallID      string    `json:"call_id"`
	Scope       string    `json:"scope"`
	Probe       bool      `json:"probe"`
	// Observe: the scope ran in observe-only mode (nothing was held back).
	Observe     bool      `json:"observe"`
	AdmittedSeq int64     `json:"admitted_seq"`
	AdmittedAt  time.Time `json:"admitted_at"`
	// SentAt is the instant just before the request was written; zero when
	// the answer was never recorded (the worker died on the way).
	SentAt    time.Time `json:"sent_at"`
	Throttled bool      `json:"throttled"`
	// IgnoredSeq names the known offer whose deadline (IgnoredNotBefore)
	// was still ahead at AdmittedAt; 0 when none.
	IgnoredSeq       int64     `json:"ignored_seq,omitempty"`
	IgnoredNotBefore time.Time `json:"ignored_not_before"`
	// InFlightSeq names the later offer announced (InFlightRecordedAt)
	// before SentAt with a deadline after it; 0 when none.
	InFlightSeq        int64     `json:"in_flight_seq,omitempty"`
	InFlightRecordedAt time.Time `json:"in_flight_recorded_at"`
}

// Ignored reports whether the submission ignored a known cooldown.
func (c SubmissionCheck) Ignored() bool { return c.IgnoredSeq != 0 }

// InFlight reports whether the submission was in flight when a later
// cooldown was announced (and did not ignore a known one).
func (c SubmissionCheck) InFlight() bool { return !c.Ignored() && c.InFlightSeq != 0 }

// Gap is the admission-to-send gap; 0 when SentAt is unknown.
func (c SubmissionCheck) Gap() time.Duration {
	if c.SentAt.IsZero() {
		return 0
	}
	return max(c.SentAt.Sub(c.AdmittedAt), 0)
}

// CooldownAccounting is what a set of submissions met, by the exact rule.
type CooldownAccounting struct {
	Submissions int `json:"submissions"`
	// IgnoredKnownCooldown: submissions that ignored a cooldown their
	// admission knew of. 0 in an enforced scope, always; in an observed
	// one, what enforcement would have held back.
	IgnoredKnownCooldown int `json:"ignored_known_cooldown"`
	// InFlight: submissions on their way when a later cooldown was
	// announced: allowed, counted apart.
	InFlight int `json:"in_flight"`
	// Throttled: submissions answered 429; ThrottledIgnored, those of them
	// that ignored a known cooldown.
	Throttled        int `json:"throttled"`
	ThrottledIgnored int `json:"throttled_ignored"`
	// Sent: submissions whose sending instant is known; the gaps are theirs.
	Sent int `json:"sent"`
	// GapP50, GapP99, GapMax: the admission-to-send gap over Sent;
	// InFlightGapMax, the longest gap of an in-flight submission.
	GapP50         time.Duration `json:"gap_p50"`
	GapP99         time.Duration `json:"gap_p99"`
	GapMax         time.Duration `json:"gap_max"`
	InFlightGapMax time.Duration `json:"in_flight_gap_max"`
	// Ignored and InFlightList list the first IgnoredListMax of each, in
	// admission order.
	Ignored      []SubmissionCheck `json:"ignored"`
	InFlightList []SubmissionCheck `json:"in_flight_list"`
}

// SubmissionChecks judges every submission of tenants' recordings (every
// tenant's when tenants is nil) recorded at or after since, in admission
// order. Submissions made before the ledger recorded admitted_seq are not
// included.
func (l *Ledger) SubmissionChecks(ctx context.Context, tenants []string, since time.Time) ([]SubmissionCheck, error) {
	rows, err := l.queries.SubmissionChecks(ctx, l.pool, dbsqlc.SubmissionChecksParams{Tenants: tenants, Since: pgtime.Write(since)})
	if err != nil {
		return nil, fmt.Errorf("judging submissions against cooldowns: %w", translate(err))
	}
	epoch := time.Unix(0, 0)
	at := func(t time.Time) time.Time {
		if !t.After(epoch) {
			return time.Time{}
		}
		return t.UTC()
	}
	out := make([]SubmissionCheck, len(rows))
	for i, r := range rows {
		out[i] = SubmissionCheck{RecordingID: r.RecordingID, TenantID: r.TenantID, CallID: r.CallID, Scope: r.Scope,
			Probe: r.Probe, Observe: r.Observe, AdmittedSeq: r.AdmittedSeq, AdmittedAt: r.AdmittedAt.UTC(), SentAt: at(r.SentAt),
			Throttled: r.Throttled, IgnoredSeq: r.IgnoredSeq, IgnoredNotBefore: at(r.IgnoredNotBefore),
			InFlightSeq: r.InFlightSeq, InFlightRecordedAt: at(r.InFlightRecordedAt)}
	}
	return out, nil
}

// SubmissionAccounting sums SubmissionChecks: the exact accounting of
// tenants' submissions (every tenant's when tenants is nil) since.
func (l *Ledger) SubmissionAccounting(ctx context.Context, tenants []string, since time.Time) (CooldownAccounting, error) {
	checks, err := l.SubmissionChecks(ctx, tenants, since)
	if err != nil {
		return CooldownAccounting{}, err
	}
	return AccountFor(checks), nil
}

// AccountFor sums checks.
func AccountFor(checks []SubmissionCheck) CooldownAccounting {
	a := CooldownAccounting{Submissions: len(checks), Ignored: []SubmissionCheck{}, InFlightList: []SubmissionCheck{}}
	var gaps []time.Duration
	for _, c := range checks {
		if c.Throttled {
			a.Throttled++
		}
		if !c.SentAt.IsZero() {
			gaps = append(gaps, c.Gap())
		}
		switch {
		case c.Ignored():
			a.IgnoredKnownCooldown++
			if c.Throttled {
				a.ThrottledIgnored++
			}
			if len(a.Ignored) < IgnoredListMax {
				a.Ignored = append(a.Ignored, c)
			}
		case c.InFlight():
			a.InFlight++
			a.InFlightGapMax = max(a.InFlightGapMax, c.Gap())
			if len(a.InFlightList) < IgnoredListMax {
				a.InFlightList = append(a.InFlightList, c)
			}
		}
	}
	a.Sent = len(gaps)
	if len(gaps) > 0 {
		slices.Sort(gaps)
		a.GapP50, a.GapP99, a.GapMax = quantile(gaps, 0.50), quantile(gaps, 0.99), gaps[len(gaps)-1]
	}
	return a
}

// quantile is the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Send is one request sent to a scope and recorded outside the ledger (a
// replay delivery's try): the admission it went on (Admission.Seq and
// Admission.At) and when it was sent.
type Send struct {
	AdmittedSeq int64
	AdmittedAt  time.Time
	SentAt      time.Time
}

// SendCounts is what SendChecks found.
type SendCounts struct {
	Sends int `json:"sends"`
	// IgnoredKnownCooldown: sends whose admission knew of a deferral that
	// still held: 0 in an enforced scope, always.
	IgnoredKnownCooldown int `json:"ignored_known_cooldown"`
	// InFlight: sends on their way when a deferral recorded after their
	// admission was announced: allowed, counted apart.
	InFlight int `json:"in_flight"`
}

// SendChecks judges sends to one enforced scope by SubmissionChecks' exact
// rule and counts them.
func (l *Ledger) SendChecks(ctx context.Context, scope string, sends []Send) (SendCounts, error) {
	c := SendCounts{Sends: len(sends)}
	if len(sends) == 0 {
		return c, nil
	}
	p := dbsqlc.SendChecksParams{Scope: scope, AdmittedSeqs: make([]int64, len(sends)), AdmittedAts: make([]time.Time, len(sends)),
		SentAts: make([]time.Time, len(sends))}
	for i, s := range sends {
		p.AdmittedSeqs[i], p.AdmittedAts[i], p.SentAts[i] = s.AdmittedSeq, pgtime.Write(s.AdmittedAt), pgtime.Write(s.SentAt)
	}
	rows, err := l.queries.SendChecks(ctx, l.pool, p)
	if err != nil {
		return c, fmt.Errorf("judging sends to %s against its cooldowns: %w", scope, translate(err))
	}
	for _, r := range rows {
		switch {
		case r.Ignored:
			c.IgnoredKnownCooldown++
		case r.InFlight:
			c.InFlight++
		}
	}
	return c, nil
}
