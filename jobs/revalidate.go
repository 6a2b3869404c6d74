package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/ledger"
)

// Revalidate takes a committed recording back to validated (an operator's
// edge, recorded as its own event) and enqueues it, so that its transcript
// is extracted and committed again as the next action version; a job is
// inserted with client. The earlier
// versions stay as they were.
func (p *Pipeline) Revalidate(ctx context.Context, client *river.Client[pgx.Tx], id uuid.UUID, reason string) (ledger.Recording, error) {
	rec, err := p.ledger.Recording(ctx, id)
	if err != nil {
		return ledger.Recording{}, err
	}
	if rec.State != ledger.StateCommitted {
		return ledger.Recording{}, fmt.Errorf("recording %s is %s: only committed recordings can be revalidated", id, rec.State)
	}
	if reason == "" {
		reason = "operator revalidate"
	}
	var out ledger.Recording
	err = pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		out, err = p.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: id, From: ledger.StateCommitted, To: ledger.StateValidated,
			Reason: reason, ResponseClass: "operator"})
		if err != nil {
			return err
		}
		return enqueueAgainTx(ctx, client, tx, rec)
	})
	return out, err
}
