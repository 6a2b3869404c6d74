package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// metricsSources is what one process's metrics read besides what its own
// pipeline and outbox record. Every field may be nil.
type MetricsSources struct {
	// Pool: the database of the global gauges (queue depths, backlogs,
	// cooldowns, duplicate-key conflicts). Give it to one process only
	// (serve); a worker passes nil.
	Pool *pgxpool.Pool
	// Leases: its fail-open grants (this process's), and with pool the
	// vendors' capacity (in use, limits, learned limits: global).
	Leases *capacity.Leases
	// Slots and windows: their fail-open grants (this process's).
	Slots   *capacity.Slots
	Windows *capacity.Windows
	// Tokens: the process's token store, whose refusals are counted.
	Tokens *auth.Store
	// Gate: the admission gate (capacity.gate), whose tickets held are
	// read from Redis and whose waits and outcomes are this process's.
	Gate *live.Gate
	// TokenCache: the store's cache, whose accepted tokens are counted by
	// source.
	TokenCache *auth.Cache
	// Replays: with Pool, the outbox whose active replay runs are
	// exported (global, like pool's gauges). serve builds its metrics
	// before its pipeline, so the outbox is set once that exists.
	Replays *LateOutbox
}

// NewMetrics builds this process's metrics from src, with
// metrics.max_tenant_labels. Serve it with Handler at /metrics; give it
// to the pipeline through app.Caps.Metrics so that the workers of
// this process record into it.
//
// In `callscribe serve`:
//
//	replays := new(LateOutbox)
//	m := NewMetrics(a, MetricsSources{Pool: pool, Leases: leases, Slots: slots, Replays: replays})
//	... // the pipeline e, recording into m
//	replays.Set(e.Outbox)
//	mux.Handle("GET /metrics", m.Handler())
//
// and in a process running workers (caps being its app.Caps):
//
//	caps.Metrics = NewMetrics(a, MetricsSources{Leases: leases, Windows: caps.Windows})
//
// with m.Handler() served on an address of its own when that process
// serves no HTTP: Prometheus scrapes every process and sums the
// counters; the global gauges come from serve alone.
func NewMetrics(a *app.App, src MetricsSources) *metrics.Metrics {
	cfg := metrics.Config{MaxTenantLabels: a.Config.Metrics.MaxTenantLabels, FailOpen: map[string]func() int64{}}
	if src.Pool != nil {
		cfg.Pool = src.Pool
		cfg.Cooldowns = cooldownAccounting(src.Pool)
		if src.Replays != nil {
			cfg.ReplayRuns = src.Replays.activeRuns
		}
		if src.Leases != nil {
			cfg.Capacity = src.Leases
		}
	}
	if src.Leases != nil {
		cfg.FailOpen["leases"] = src.Leases.Uncounted
	}
	if src.Slots != nil {
		cfg.FailOpen["slots"] = src.Slots.Uncounted
	}
	if src.Windows != nil {
		cfg.FailOpen["windows"] = src.Windows.Uncounted
	}
	if src.Tokens != nil {
		cfg.AuthFailures = src.Tokens.Failures
	}
	if src.Gate != nil {
		cfg.Gate = src.Gate
		cfg.FailOpen["gate"] = src.Gate.Uncounted
	}
	if tc := src.TokenCache; tc != nil {
		cfg.AuthCacheAccepted = map[string]func() uint64{}
		for _, source := range auth.Sources {
			cfg.AuthCacheAccepted[source] = func() uint64 { return tc.Accepted(source) }
		}
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

// LateOutbox is an outbox given to readers built before it: serve builds
// its metrics first, then the pipeline whose outbox they read.
type LateOutbox struct{ o atomic.Pointer[outbox.Outbox] }

// Set gives the outbox.
func (l *LateOutbox) Set(o *outbox.Outbox) { l.o.Store(o) }

// activeRuns is metrics.Config.ReplayRuns: the figures of the replay runs
// still active (the newest replayRunsRead), read from the database.
func (l *LateOutbox) activeRuns(ctx context.Context) ([]metrics.ReplayRun, error) {
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

// ListenMetrics serves h at /metrics on addr, a loopback address (the
// endpoint has no authentication), until the returned func is called.
func ListenMetrics(ctx context.Context, a *app.App, addr string, h http.Handler) (func(), error) {
	if !config.Loopback(addr) {
		return nil, fmt.Errorf("--metrics-addr %s: a loopback address only (the endpoint has no authentication; put serve's authenticated /metrics or a proxy in front for more)", addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(a.Env.Stdout, "metrics on http://%s/metrics\n", ln.Addr())
	return func() { _ = srv.Close() }, nil
}
