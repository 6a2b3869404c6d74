package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/ledger"
)

// ErrProductionTarget: replay refuses a target marked production unless
// explicitly allowed.
var ErrProductionTarget = errors.New("the target is marked production")

// ReplayOptions chooses what to replay and where.
type ReplayOptions struct {
	// From and To bound the recordings' ingest time; To is exclusive.
	From, To time.Time
	// TenantID: "" = every tenant.
	TenantID string
	// State of the recordings to replay. Default committed.
	State ledger.State
	// Target receives the re-delivered action sets; TargetName names it.
	Target     connector.Target
	TargetName string
	// Production marks Target as a production CRM: refused unless
	// AllowProduction.
	Production, AllowProduction bool
	// Reingest re-ingests one recording by its business key, converging
	// on its row (jobs.Pipeline.Ingest in callscribe); one not finished
	// is then run by the workers as usual. Required.
	Reingest func(ctx context.Context, rec ledger.Recording) error
	// Progress, when set, is told how far the replay got.
	Progress func(done, total int)
}

// ReplayReport is what a replay did. Replaying into a target that already
// holds the action sets must change audit counters only: NewActionVersions
// and CRMEffectsCreated stay 0.
type ReplayReport struct {
	Recordings          int
	AuditEventsAppended int64
	NewActionVersions   int64
	CRMEffectsCreated   int
	CRMReplays          int
	// Problems: recordings or deliveries that could not be replayed, each
	// saying which and why. The others were replayed.
	Problems []string
}

// Replay re-drives historical recordings for staging: each is re-ingested
// by its business key (converging on its row; one not finished is run by
// the workers as usual), and its committed action sets are delivered again
// to the given target with their original idempotency keys.
func (o *Outbox) Replay(ctx context.Context, opts ReplayOptions) (ReplayReport, error) {
	var rep ReplayReport
	if opts.Production && !opts.AllowProduction {
		return rep, fmt.Errorf("replay to %s: %w; give --allow-production to replay into it anyway", opts.TargetName, ErrProductionTarget)
	}
	if opts.Reingest == nil || opts.Target == nil {
		return rep, errors.New("replay needs a way to re-ingest and a target")
	}
	if opts.State == "" {
		opts.State = ledger.StateCommitted
	}
	before, err := o.Audit(ctx)
	if err != nil {
		return rep, err
	}
	recs, err := o.ledger.Recordings(ctx, ledger.RecordingFilter{State: opts.State, TenantID: opts.TenantID, From: opts.From, To: opts.To, Limit: 1_000_000})
	if err != nil {
		return rep, err
	}
	for i, r := range recs {
		if opts.Progress != nil {
			opts.Progress(i, len(recs))
		}
		if err := opts.Reingest(ctx, r); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s/%s: re-ingest: %v", r.TenantID, r.CallID, err))
			continue
		}
		rep.Recordings++
		sets, err := o.ActionSetsOf(ctx, r.ID)
		if err != nil {
			return rep, err
		}
		for _, s := range sets {
			res, err := o.Redeliver(ctx, s, opts.Target, opts.TargetName)
			switch {
			case err != nil:
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", s.IdempotencyKey(), err))
			case res.Outcome == connector.OutcomeApplied:
				rep.CRMEffectsCreated++
			case res.Outcome == connector.OutcomeReplayed:
				rep.CRMReplays++
			default:
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (%s, HTTP %d) %s", s.IdempotencyKey(), res.Outcome, res.Class, res.HTTPStatus, res.Message))
			}
		}
	}
	if opts.Progress != nil {
		opts.Progress(len(recs), len(recs))
	}
	after, err := o.Audit(ctx)
	if err != nil {
		return rep, err
	}
	rep.AuditEventsAppended = (after.LedgerEvents - before.LedgerEvents) + (after.OutboxEvents - before.OutboxEvents)
	rep.NewActionVersions = after.ActionSets - before.ActionSets
	return rep, nil
}
