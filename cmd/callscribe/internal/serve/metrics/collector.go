package metrics

import (
	"context"
	"embed"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

//go:embed sql/*.sql
var queries embed.FS

func query(name string) string {
	b, err := queries.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("metrics: query %s: %v", name, err))
	}
	return string(b)
}

var (
	qOldestEligible = query("oldest_eligible")
	qScopes         = query("scopes")
	qOutbox         = query("outbox")
	qRiver          = query("river")
	qCounters       = query("counters")
	qBatch          = query("batch")
)

// The gauges read at scrape time.
var (
	descOldestEligible = prometheus.NewDesc("callscribe_oldest_eligible_age_seconds",
		"Age (since receipt) of the oldest recording waiting to be submitted (eligible, or retry_wait past its not_before), by lane; 0 when none waits. Global: read from the database.",
		[]string{"lane"}, nil)
	descCooldownsActive = prometheus.NewDesc("callscribe_scope_cooldowns_active",
		"Throttling scopes (speech vendor and CRM) whose deadline is still ahead. Global: read from the database.", nil, nil)
	descScopesPaused = prometheus.NewDesc("callscribe_scopes_paused",
		"Throttling scopes paused until an operator resumes them. Global: read from the database.", nil, nil)
	descOutboxPending = prometheus.NewDesc("callscribe_outbox_backlog",
		"Outbox rows pending delivery to a CRM. Global: read from the database.", nil, nil)
	descOutboxDead = prometheus.NewDesc("callscribe_outbox_dead",
		"Outbox rows dead (given up, reviewable). Global: read from the database.", nil, nil)
	descOutboxOldest = prometheus.NewDesc("callscribe_outbox_oldest_pending_age_seconds",
		"Age of the oldest pending outbox row since its commit; 0 when none is pending. Global: read from the database.", nil, nil)
	descRiverDepth = prometheus.NewDesc("callscribe_river_queue_depth",
		"River jobs waiting in a queue, by queue and state (available, scheduled, retryable). Global: read from the database.",
		[]string{"queue", "state"}, nil)
	descDuplicateKey = prometheus.NewDesc("callscribe_duplicate_key_conflicts_total",
		"Commits that met an action set another worker had already committed, and converged on it (the counters table). Global: read from the database.",
		nil, nil)
	descBatchManifests = prometheus.NewDesc("callscribe_batch_manifests",
		"The batch lane's manifests, by state (formed, submitted and accepted are in flight; done; unbatched: the vendor offers no batches). Global: read from the database.",
		[]string{"state"}, nil)
	descBatchItems = prometheus.NewDesc("callscribe_batch_items",
		"Items of the batch lane's manifests, by state (pending, completed, failed, resubmit: sent back for a later manifest, dropped); items per manifest is their sum over the manifests' sum. Global: read from the database.",
		[]string{"state"}, nil)
	descBatchPartial = prometheus.NewDesc("callscribe_batch_partial_completions",
		"Finished manifests that did not complete every item on their own (an item failed, was sent back or dropped). Global: read from the database.",
		nil, nil)
	descIgnoredCooldown = prometheus.NewDesc("callscribe_submissions_ignored_known_cooldown",
		"Submissions of the last hour that ignored a cooldown their admission knew of (an offer numbered up to the scope sequence number it read still deferred the scope); must be 0 in enforced scopes. Global: read from the database.",
		nil, nil)
	descInFlightCooldown = prometheus.NewDesc("callscribe_submissions_in_flight_at_cooldown",
		"Submissions of the last hour sent while a later cooldown was being announced (allowed, counted apart). Global: read from the database.",
		nil, nil)
	descCapInUse = prometheus.NewDesc("callscribe_capacity_in_use",
		"Vendor concurrency slots held, by provider and kind. Global: read from Redis.", []string{"provider", "kind"}, nil)
	descCapLimit = prometheus.NewDesc("callscribe_capacity_limit",
		"Configured vendor concurrency limit, by provider and kind.", []string{"provider", "kind"}, nil)
	descCapEffective = prometheus.NewDesc("callscribe_capacity_effective_limit",
		"Vendor concurrency limit in force (learned from a refusal, else configured), by provider and kind. Global: read from Redis.",
		[]string{"provider", "kind"}, nil)
	descCapLearned = prometheus.NewDesc("callscribe_capacity_limit_learned",
		"1 when the limit in force was learned from a vendor's refusal, else 0, by provider and kind. Global: read from Redis.",
		[]string{"provider", "kind"}, nil)
	descCapLearnedLimit = prometheus.NewDesc("callscribe_capacity_learned_limit",
		"The limit learned from a vendor's refusal and in force now, by provider and kind; absent while none is. Global: read from Redis.",
		[]string{"provider", "kind"}, nil)
)

// sharedCollector reads the global gauges from the database and Redis at
// each scrape.
type sharedCollector struct{ m *Metrics }

func (c *sharedCollector) Describe(ch chan<- *prometheus.Desc) {
	c.m.scrapeErrors.Describe(ch)
	if c.m.cfg.Pool != nil {
		for _, d := range []*prometheus.Desc{descOldestEligible, descCooldownsActive, descScopesPaused, descOutboxPending,
			descOutboxDead, descOutboxOldest, descRiverDepth, descDuplicateKey, descBatchManifests, descBatchItems, descBatchPartial} {
			ch <- d
		}
	}
	if c.m.cfg.Cooldowns != nil {
		ch <- descIgnoredCooldown
		ch <- descInFlightCooldown
	}
	if c.m.cfg.ReplayRuns != nil {
		for _, d := range replayDescs {
			ch <- d
		}
	}
	if c.m.cfg.Capacity != nil {
		for _, d := range []*prometheus.Desc{descCapInUse, descCapLimit, descCapEffective, descCapLearned, descCapLearnedLimit} {
			ch <- d
		}
	}
}

func (c *sharedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.m.cfg.ScrapeTimeout)
	defer cancel()
	if c.m.cfg.Pool != nil {
		if err := c.collectDatabase(ctx, ch); err != nil {
			c.m.scrapeErrors.WithLabelValues("database").Inc()
		}
	}
	if f := c.m.cfg.Cooldowns; f != nil {
		ignored, inFlight, err := f(ctx, c.m.cfg.Clock.Now().Add(-CooldownWindow))
		if err != nil {
			c.m.scrapeErrors.WithLabelValues("database").Inc()
		} else {
			ch <- prometheus.MustNewConstMetric(descIgnoredCooldown, prometheus.GaugeValue, float64(ignored))
			ch <- prometheus.MustNewConstMetric(descInFlightCooldown, prometheus.GaugeValue, float64(inFlight))
		}
	}
	if c.m.cfg.ReplayRuns != nil {
		if err := c.collectReplay(ctx, ch); err != nil {
			c.m.scrapeErrors.WithLabelValues("database").Inc()
		}
	}
	if c.m.cfg.Capacity != nil {
		if err := c.collectCapacity(ctx, ch); err != nil {
			c.m.scrapeErrors.WithLabelValues("capacity").Inc()
		}
	}
	// After the reads, so that a scrape reports its own errors (the
	// registry collects its collectors concurrently).
	c.m.scrapeErrors.Collect(ch)
}

// collectDatabase sends the database's gauges; on an error it stops,
// having sent those read before.
func (c *sharedCollector) collectDatabase(ctx context.Context, ch chan<- prometheus.Metric) error {
	pool := c.m.cfg.Pool
	now := c.m.cfg.Clock.Now().UTC()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	rows, err := pool.Query(ctx, qOldestEligible, now)
	if err != nil {
		return err
	}
	var lane string
	var age float64
	for rows.Next() {
		if err := rows.Scan(&lane, &age); err != nil {
			rows.Close()
			return err
		}
		gauge(descOldestEligible, max(age, 0), lane)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var cooling, paused int64
	if err := pool.QueryRow(ctx, qScopes, now).Scan(&cooling, &paused); err != nil {
		return err
	}
	gauge(descCooldownsActive, float64(cooling))
	gauge(descScopesPaused, float64(paused))
	var pending, dead int64
	var oldest float64
	if err := pool.QueryRow(ctx, qOutbox, now).Scan(&pending, &dead, &oldest); err != nil {
		return err
	}
	gauge(descOutboxPending, float64(pending))
	gauge(descOutboxDead, float64(dead))
	gauge(descOutboxOldest, max(oldest, 0))
	rows, err = pool.Query(ctx, qRiver)
	if err != nil {
		return err
	}
	var queue, state string
	var jobs int64
	for rows.Next() {
		if err := rows.Scan(&queue, &state, &jobs); err != nil {
			rows.Close()
			return err
		}
		gauge(descRiverDepth, float64(jobs), queue, state)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = pool.Query(ctx, qCounters)
	if err != nil {
		return err
	}
	counters := map[string]int64{}
	var name string
	var value int64
	for rows.Next() {
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return err
		}
		counters[name] = value
	}
	if err := rows.Err(); err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(descDuplicateKey, prometheus.CounterValue, float64(counters[counterDuplicateKeyConflicts]))
	return c.collectBatch(ctx, gauge)
}

// The states the batch gauges always report (0 when none).
var (
	batchManifestStates = []string{"formed", "submitted", "accepted", "done", "unbatched"}
	batchItemStates     = []string{"pending", "completed", "failed", "resubmit", "dropped"}
)

// collectBatch sends the batch lane's gauges.
func (c *sharedCollector) collectBatch(ctx context.Context, gauge func(*prometheus.Desc, float64, ...string)) error {
	rows, err := c.m.cfg.Pool.Query(ctx, qBatch)
	if err != nil {
		return err
	}
	got := map[[2]string]int64{}
	var kind, state string
	var n int64
	for rows.Next() {
		if err := rows.Scan(&kind, &state, &n); err != nil {
			rows.Close()
			return err
		}
		got[[2]string{kind, state}] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range batchManifestStates {
		gauge(descBatchManifests, float64(got[[2]string{"manifest", s}]), s)
	}
	for _, s := range batchItemStates {
		gauge(descBatchItems, float64(got[[2]string{"item", s}]), s)
	}
	gauge(descBatchPartial, float64(got[[2]string{"partial", "done"}]))
	return nil
}

// counterDuplicateKeyConflicts is outbox.CounterDuplicateKeyConflicts
// (a test keeps them equal).
const counterDuplicateKeyConflicts = "duplicate_key_conflicts"

// collectCapacity sends the vendors' capacity gauges.
func (c *sharedCollector) collectCapacity(ctx context.Context, ch chan<- prometheus.Metric) error {
	status, err := c.m.cfg.Capacity.Status(ctx)
	if err != nil {
		return err
	}
	for _, s := range status {
		learned := 0.0
		if s.Learned {
			learned = 1
		}
		ch <- prometheus.MustNewConstMetric(descCapInUse, prometheus.GaugeValue, float64(s.InUse), s.Provider, s.Kind)
		ch <- prometheus.MustNewConstMetric(descCapLimit, prometheus.GaugeValue, float64(s.ConfiguredLimit), s.Provider, s.Kind)
		ch <- prometheus.MustNewConstMetric(descCapEffective, prometheus.GaugeValue, float64(s.EffectiveLimit), s.Provider, s.Kind)
		ch <- prometheus.MustNewConstMetric(descCapLearned, prometheus.GaugeValue, learned, s.Provider, s.Kind)
		if s.Learned {
			ch <- prometheus.MustNewConstMetric(descCapLearnedLimit, prometheus.GaugeValue, float64(s.EffectiveLimit), s.Provider, s.Kind)
		}
	}
	return nil
}
