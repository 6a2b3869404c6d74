package app

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/outbox"
)

// ReplayTargets are the configured crm_targets as the outbox takes them.
func (a *App) ReplayTargets() (map[string]outbox.ReplayTarget, error) {
	out := make(map[string]outbox.ReplayTarget, len(a.Config.CRMTargets))
	for _, name := range slices.Sorted(maps.Keys(a.Config.CRMTargets)) {
		tc := a.Config.CRMTargets[name]
		tgt, err := connector.New(tc.Config)
		if err != nil {
			return nil, fmt.Errorf("crm_targets.%s: %w", name, err)
		}
		out[name] = outbox.ReplayTarget{Target: tgt, Scope: cmp.Or(tc.Scope, config.ReplayTargetScope(name)),
			DeliveryDeadline: tc.DeliveryDeadline, Production: tc.Production}
	}
	return out, nil
}

// OpenReplay opens the pipeline for a replay command; with work, its River
// client works the replay queue only, with the scopes' windows when a
// Redis URL is configured. stop closes what it opened.
func (a *App) OpenReplay(ctx context.Context, work bool) (*Pipeline, func(), error) {
	if !work {
		e, err := a.OpenPipeline(ctx, Caps{})
		if err != nil {
			return nil, nil, err
		}
		return e, e.Close, nil
	}
	caps := Caps{Queues: []string{outbox.ReplayQueue}}
	var rdb *capacity.Redis
	if a.Config.RedisURL != "" {
		var err error
		if rdb, err = a.NewCapacityRedis(); err != nil {
			return nil, nil, err
		}
		if caps.Windows, err = a.OpenWindows(rdb); err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
	} else {
		a.Logger.Warn("no Redis URL: the replay target's scope has no shared concurrency window (admission is the scope's deadline and probe only)")
	}
	e, err := a.OpenPipeline(ctx, caps)
	if err != nil {
		if rdb != nil {
			_ = rdb.Close()
		}
		return nil, nil, err
	}
	return e, func() {
		e.Close()
		caps.Windows.Flush(context.Background()) // releases still waiting for an acquire (ReleaseLater)
		if rdb != nil {
			_ = rdb.Close()
		}
	}, nil
}
