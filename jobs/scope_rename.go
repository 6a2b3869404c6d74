package jobs

import (
	"context"
	"log/slog"
	"maps"
	"slices"
)

// AdoptFormerScopes carries each derived scope's state over from the name
// it had before scopes were named by account (<provider>:<first 8 hex of
// sha256(api key)>:<model>): a deadline, a pending probe or a pause in
// force under the old name holds under the new one, so that renaming
// does not send requests to a vendor account that is cooling down. The
// old name's history (its offers) stays under the old name, readable with
// `callscribe scopes show`. It does nothing for a scope that already has
// state under its new name, and runs once per process: the first step of
// any job calls it, and it is retried by the next while the database
// fails. A tenant whose scope is set (pipeline.tenants.<id>.scope) keeps
// that name and has nothing to adopt.
func (p *Pipeline) AdoptFormerScopes(ctx context.Context) error {
	if p.adopted.Load() {
		return nil
	}
	p.adoptMu.Lock()
	defer p.adoptMu.Unlock()
	if p.adopted.Load() {
		return nil
	}
	done := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(p.cfg.Tenants)) {
		t := p.cfg.Tenants[id]
		if t.formerScope == "" || done[t.Scope] {
			continue
		}
		adopted, err := p.ledger.ScopeAdopt(ctx, t.formerScope, t.Scope)
		if err != nil {
			return err
		}
		done[t.Scope] = true
		if adopted {
			p.log.Info("scope renamed by account: carried its deadline, probe and pause over from the former name (whose history stays there)",
				slog.String("scope", t.Scope), slog.String("former_scope", t.formerScope))
		}
	}
	p.adopted.Store(true)
	return nil
}

// adoptFormerScopes is AdoptFormerScopes for a step: a failure is logged
// and the next step tries again.
func (p *Pipeline) adoptFormerScopes(ctx context.Context) {
	if err := p.AdoptFormerScopes(ctx); err != nil {
		p.log.Warn("carrying renamed scopes over from their former names", slog.String("error", err.Error()))
	}
}
