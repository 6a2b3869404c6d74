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

// observed reports whether cohort runs in observe mode: its stored mode,
// or fallback when it has none. When the modes cannot be read, the last
// ones known stand (fallback for every cohort when none were read).
func (r *rolloutModes) observed(ctx context.Context, l *ledger.Ledger, cohort string, fallback ledger.RolloutMode) bool {
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
	mode, ok := r.modes[cohort]
	if !ok {
		mode = fallback
	}
	return mode == ledger.RolloutObserve
}

// CohortMode is one cohort's mode and the configured tenants in it.
type CohortMode struct {
	Cohort string             `json:"cohort"`
	Mode   ledger.RolloutMode `json:"mode"`
	// Stored: the mode was set (`callscribe rollout set`); false: the
	// cohort runs in Config.RolloutDefault.
	Stored  bool     `json:"stored"`
	Tenants []string `json:"tenants"`
}

// CohortReport is one cohort's mode, tenants and what their submissions
// met, by the exact rule (ledger.CooldownAccounting).
type CohortReport struct {
	CohortMode
	ledger.CooldownAccounting
}

// Cohorts is every cohort of the configured tenants and every cohort with
// a stored mode, sorted, each with the mode it runs in: its stored one,
// else Config.RolloutDefault.
func (p *Pipeline) Cohorts(ctx context.Context) ([]CohortMode, error) {
	stored, err := p.ledger.RolloutModes(ctx)
	if err != nil {
		return nil, err
	}
	byCohort := map[string]*CohortMode{}
	get := func(c string) *CohortMode {
		if r, ok := byCohort[c]; ok {
			return r
		}
		r := &CohortMode{Cohort: c, Mode: p.cfg.RolloutDefault, Tenants: []string{}}
		byCohort[c] = r
		return r
	}
	for _, c := range stored {
		r := get(c.Cohort)
		r.Mode, r.Stored = c.Mode, true
	}
	for id, t := range p.cfg.Tenants {
		r := get(t.Cohort)
		r.Tenants = append(r.Tenants, id)
	}
	out := make([]CohortMode, 0, len(byCohort))
	for _, r := range byCohort {
		slices.Sort(r.Tenants)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b CohortMode) int { return strings.Compare(a.Cohort, b.Cohort) })
	return out, nil
}

// RolloutReport is, for every cohort of Cohorts, its mode and what its
// submissions since met: for an observed cohort, the submissions that
// went out inside a cooldown the platform knew of and the 429s that
// followed them are what enforcement would have changed; an enforced
// cohort is the comparison.
func (p *Pipeline) RolloutReport(ctx context.Context, since time.Time) ([]CohortReport, error) {
	cohorts, err := p.Cohorts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CohortReport, len(cohorts))
	for i, c := range cohorts {
		out[i].CohortMode = c
		if out[i].CooldownAccounting, err = p.ledger.SubmissionAccounting(ctx, c.Tenants, since); err != nil {
			return nil, err
		}
	}
	return out, nil
}
