package ledger

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// RolloutMode is a cohort's deferral mode.
type RolloutMode string

// The modes. A cohort without a stored mode enforces.
const (
	// RolloutObserve: throttling is recorded (observe-only offers) but
	// every request goes through.
	RolloutObserve RolloutMode = "observe"
	// RolloutEnforce: the shared deferral, probe and window apply.
	RolloutEnforce RolloutMode = "enforce"
)

// Cohort is a cohort's stored mode.
type Cohort struct {
	Cohort    string      `json:"cohort"`
	Mode      RolloutMode `json:"mode"`
	Reason    string      `json:"reason"`
	UpdatedAt time.Time   `json:"updated_at"`
}

var cohortRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// SetRolloutMode sets cohort's mode and records the change as an event.
// Workers pick it up within their mode cache's lifetime, no restart.
func (l *Ledger) SetRolloutMode(ctx context.Context, cohort string, mode RolloutMode, reason string) (Cohort, error) {
	switch {
	case !cohortRE.MatchString(cohort):
		return Cohort{}, &InvalidError{Field: "cohort", Reason: "want 1-128 of A-Z a-z 0-9 . _ -"}
	case mode != RolloutObserve && mode != RolloutEnforce:
		return Cohort{}, &InvalidError{Field: "mode", Reason: fmt.Sprintf("%q: want observe or enforce", mode)}
	case len(reason) > 512:
		return Cohort{}, &InvalidError{Field: "reason", Reason: "at most 512 bytes"}
	}
	row, err := l.queries.RolloutSet(ctx, l.pool, dbsqlc.RolloutSetParams{Cohort: cohort, Mode: string(mode), Reason: reason, At: l.now()})
	if err != nil {
		return Cohort{}, fmt.Errorf("setting the rollout mode of %s: %w", cohort, translate(err))
	}
	return Cohort{Cohort: row.Cohort, Mode: RolloutMode(row.Mode), Reason: row.Reason, UpdatedAt: row.UpdatedAt.UTC()}, nil
}

// RolloutModes returns every stored cohort mode.
func (l *Ledger) RolloutModes(ctx context.Context) ([]Cohort, error) {
	rows, err := l.queries.RolloutList(ctx, l.pool)
	if err != nil {
		return nil, fmt.Errorf("reading rollout modes: %w", translate(err))
	}
	out := make([]Cohort, len(rows))
	for i, r := range rows {
		out[i] = Cohort{Cohort: r.Cohort, Mode: RolloutMode(r.Mode), Reason: r.Reason, UpdatedAt: r.UpdatedAt.UTC()}
	}
	return out, nil
}
