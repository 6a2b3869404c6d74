// Package metrics is callscribe's Prometheus metrics: one registry holding
// every metric, the recording methods that packages jobs and outbox call
// through interfaces of their own (jobs.Metrics, outbox.Metrics), a
// collector that reads the database- and Redis-derived gauges at scrape
// time (the database's through the ledger's and the outbox's APIs, River's
// queue depths from River's tables), and the HTTP handler that serves
// them (Handler, mounted at /metrics).
//
// # What it guarantees
//
//   - Every metric is named callscribe_*, states its unit in its name
//     (_seconds, _total) and has HELP text.
//   - Label sets are bounded: no label carries a recording, a call or a
//     job; tenant labels are limited to Config.MaxTenantLabels distinct
//     tenants, the rest reported as "other" (TenantLabels); providers,
//     scopes, CRM targets, lanes and queues come from configuration. The
//     replay gauges' run label names a replay run (an operator's command,
//     not a recording): only runs still active are exported, at most the
//     bound of Config.ReplayRuns's source, and a run's series end with it.
//   - Correct across several worker processes: the counters and
//     histograms that the recording methods feed are per process, each
//     event observed once by the process that made it happen (a committed
//     transcript at its commit's success, a delivery at the statement
//     that settled it), so Prometheus sums them over processes. The gauges
//     read from the shared database and Redis (queue depths, backlogs,
//     active cooldowns, capacity, duplicate-key conflicts, the figures of
//     active replay runs) are global: only a Metrics given a Config.Pool
//     (and Config.Capacity, Config.ReplayRuns) exports them, and
//     one process should be so configured (`callscribe serve`); where
//     several are, aggregate those series with max, not sum.
//
// # What it does not do
//
// It pushes nothing and keeps no history: Prometheus scrapes and stores.
// A scrape that cannot reach the database or Redis omits the gauges it
// could not read (and callscribe_scrape_errors_total counts it) rather
// than failing the scrape.
package metrics
