package cli

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// metricsSources is what one process's metrics read besides what its own
// pipeline and outbox record. Every field may be nil.
type metricsSources struct {
	// pool: the database of the global gauges (queue depths, backlogs,
	// cooldowns, duplicate-key conflicts). Give it to one process only
	// (serve); a worker passes nil.
	pool *pgxpool.Pool
	// leases: its fail-open grants (this process's), and with pool the
	// vendors' capacity (in use, limits, learned limits: global).
	leases *capacity.Leases
	// slots and windows: their fail-open grants (this process's).
	slots   *capacity.Slots
	windows *capacity.Windows
	// tokens: the process's token store, whose refusals are counted.
	tokens *auth.Store
	// replays: with pool, the outbox whose active replay runs are
	// exported (global, like pool's gauges). serve builds its metrics
	// before its pipeline, so the outbox is set once that exists.
	replays *lateOutbox
}

// newMetrics builds this process's metrics from src, with
// metrics.max_tenant_labels. Serve it with Handler at /metrics; give it
// to the pipeline through pipelineCaps.metrics so that the workers of
// this process record into it.
//
// In `callscribe serve`:
//
//	replays := new(lateOutbox)
//	m := a.newMetrics(metricsSources{pool: pool, leases: leases, slots: slots, replays: replays})
//	... // the pipeline env e, recording into m
//	replays.set(e.outbox)
//	mux.Handle("GET /metrics", m.Handler())
//
// and in a process running workers (caps being its pipelineCaps):
//
//	caps.metrics = a.newMetrics(metricsSources{leases: leases, windows: caps.windows})
//
// with m.Handler() served on an address of its own when that process
// serves no HTTP: Prometheus scrapes every process and sums the
// counters; the global gauges come from serve alone.
func (a *commands) newMetrics(src metricsSources) *metrics.Metrics {
	cfg := metrics.Config{MaxTenantLabels: a.Config.Metrics.MaxTenantLabels, FailOpen: map[string]func() int64{}}
	if src.pool != nil {
		cfg.Pool = src.pool
		cfg.Cooldowns = cooldownAccounting(src.pool)
		if src.replays != nil {
			cfg.ReplayRuns = src.replays.activeRuns
		}
		if src.leases != nil {
			cfg.Capacity = src.leases
		}
	}
	if src.leases != nil {
		cfg.FailOpen["leases"] = src.leases.Uncounted
	}
	if src.slots != nil {
		cfg.FailOpen["slots"] = src.slots.Uncounted
	}
	if src.windows != nil {
		cfg.FailOpen["windows"] = src.windows.Uncounted
	}
	if src.tokens != nil {
		cfg.AuthFailures = src.tokens.Failures
	}
	if w := a.Alerts().Webhook(); w != nil {
		cfg.LimitAlertWebhook = map[string]func() int64{"delivered": w.Delivered, "failed": w.Failed, "dropped": w.Dropped}
	}
	m := metrics.New(cfg)
	a.Alerts().AttachMetrics(m)
	return m
}

// cooldownAccounting is metrics.Config.Cooldowns over pool: the exact
// rule's counts (ledger.SubmissionChecks) of enforced submissions that
// ignored a known cooldown, and of all in flight.
func cooldownAccounting(pool *pgxpool.Pool) func(ctx context.Context, since time.Time) (int, int, error) {
	return func(ctx context.Context, since time.Time) (int, int, error) {
		l, err := ledger.New(pool, nil)
		if err != nil {
			return 0, 0, err
		}
		checks, err := l.SubmissionChecks(ctx, nil, since)
		if err != nil {
			return 0, 0, err
		}
		ignored, inFlight := 0, 0
		for _, c := range checks {
			switch {
			case c.Ignored() && !c.Observe:
				ignored++
			case c.InFlight():
				inFlight++
			}
		}
		return ignored, inFlight, nil
	}
}

// replayRunsRead bounds the active replay runs /metrics and the status
// page read at once (newest first).
const replayRunsRead = 20

// lateOutbox is an outbox given to readers built before it: serve builds
// its metrics first, then the pipeline whose outbox they read.
type lateOutbox struct{ o atomic.Pointer[outbox.Outbox] }

// set gives the outbox.
func (l *lateOutbox) set(o *outbox.Outbox) { l.o.Store(o) }

// activeRuns is metrics.Config.ReplayRuns: the figures of the replay runs
// still active (the newest replayRunsRead), read from the database.
func (l *lateOutbox) activeRuns(ctx context.Context) ([]metrics.ReplayRun, error) {
	o := l.o.Load()
	if o == nil {
		return nil, errors.New("replay runs: the outbox is not set up yet")
	}
	runs, err := o.ReplayRuns(ctx, true, replayRunsRead)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.ReplayRun, 0, len(runs))
	for _, r := range runs {
		if r.Active() { // ended between the list and its read
			out = append(out, replayFigures(r))
		}
	}
	return out, nil
}

// replayFigures is a run's figures as the replay gauges report them.
func replayFigures(r outbox.ReplayRun) metrics.ReplayRun {
	rep := r.Report
	return metrics.ReplayRun{ID: r.ID, Target: r.Target,
		RecordingsEnumerated: r.Enumerated, RecordingsReplayed: rep.RecordingsReplayed,
		Deliveries: rep.Deliveries, DeliveriesPending: rep.Pending,
		CRMEffectsCreated: rep.CRMEffectsCreated, AnsweredAsReplays: rep.AnsweredAsReplays,
		Throttled: rep.Throttled, Transient: rep.Transient, Dead: rep.Dead,
		AuditEventsAppended: rep.AuditEventsAppended, NewActionVersions: rep.NewActionVersions,
		SentInsideKnownCooldown: int64(rep.Sends.IgnoredKnownCooldown), InFlightAtCooldown: int64(rep.Sends.InFlight)}
}
