package jobs

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/callscribe/callscribe/ledger"
)

// rolloutModes caches the cohorts' deferral modes, read from the ledger
// at most every RolloutRefresh: `callscribe rollout set` reaches running
// workers without a restart.
type rolloutModes struct {
	mu      sync.Mutex
	modes   map[string]ledger.RolloutMode
	fetched time.Time
	log     *slog.Logger
}

// observed reports whether cohort runs in observe mode. When the modes
// cannot be read, the last ones known stand (enforce when none).
func (r *rolloutModes) observed(ctx context.Context, l *ledger.Ledger, cohort string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.fetched) >= RolloutRefresh {
		cs, err := l.RolloutModes(ctx)
		if err != nil {
			if r.log != nil {
				r.log.Warn("reading the rollout modes: keeping the last known", slog.String("error", err.Error()))
			}
		} else {
			r.modes = make(map[string]ledger.RolloutMode, len(cs))
			for _, c := range cs {
				r.modes[c.Cohort] = c.Mode
			}
		}
		r.fetched = time.Now()
	}
	return r.modes[cohort] == ledger.RolloutObserve
}

// CohortReport is one cohort's mode, tenants and what their submissions
// met, by the exact rule (ledger.CooldownAccounting).
type CohortReport struct {
	Cohort  string             `json:"cohort"`
	Mode    ledger.RolloutMode `json:"mode"`
	Tenants []string           `json:"tenants"`
	ledger.CooldownAccounting
}

// RolloutReport is, for every cohort of the configured tenants (and every
// cohort with a stored mode), its mode and what its submissions since met:
// for an observed cohort, the submissions that went out inside a cooldown
// the platform knew of and the 429s that followed them are what
// enforcement would have changed; an enforced cohort is the comparison.
func (p *Pipeline) RolloutReport(ctx context.Context, since time.Time) ([]CohortReport, error) {
	stored, err := p.ledger.RolloutModes(ctx)
	if err != nil {
		return nil, err
	}
	byCohort := map[string]*CohortReport{}
	get := func(c string) *CohortReport {
		if r, ok := byCohort[c]; ok {
			return r
		}
		r := &CohortReport{Cohort: c, Mode: ledger.RolloutEnforce, Tenants: []string{}}
		byCohort[c] = r
		return r
	}
	for _, c := range stored {
		get(c.Cohort).Mode = c.Mode
	}
	for id, t := range p.cfg.Tenants {
		r := get(t.Cohort)
		r.Tenants = append(r.Tenants, id)
	}
	out := make([]CohortReport, 0, len(byCohort))
	for _, r := range byCohort {
		slices.Sort(r.Tenants)
		if r.CooldownAccounting, err = p.ledger.SubmissionAccounting(ctx, r.Tenants, since); err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b CohortReport) int { return strings.Compare(a.Cohort, b.Cohort) })
	return out, nil
}
