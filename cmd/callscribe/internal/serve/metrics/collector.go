package metrics

import (
	"context"
	_ "embed" // the River query
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// qRiverDepth reads River's queue depths (riverDepthStates).
//
//go:embed sql/river.sql
var qRiverDepth string

// riverDepthStates are the states of the River jobs waiting in a queue,
// each reported by callscribe_river_queue_depth (0 when none).
var riverDepthStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable}

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
	if c.m.cfg.Gate != nil {
		for _, d := range gateDescs {
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
	if c.m.cfg.Gate != nil {
		if err := collectGate(ctx, c.m.cfg.Gate, ch); err != nil {
			c.m.scrapeErrors.WithLabelValues("gate").Inc()
		}
	}
	// After the reads, so that a scrape reports its own errors (the
	// registry collects its collectors concurrently).
	c.m.scrapeErrors.Collect(ch)
}

// collectDatabase sends the database's gauges, read through the ledger's
// and the outbox's APIs and River's tables: one query per family of
// gauges. On an error it stops, having sent those read before.
func (c *sharedCollector) collectDatabase(ctx context.Context, ch chan<- prometheus.Metric) error {
	pool := c.m.cfg.Pool
	now := c.m.cfg.Clock.Now().UTC()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	l, err := ledger.New(pool, nil)
	if err != nil {
		return err
	}
	ob, err := outbox.New(outbox.Config{}, pool, l)
	if err != nil {
		return err
	}
	oldest, err := l.OldestEligible(ctx, now)
	if err != nil {
		return err
	}
	for _, lane := range ledger.Lanes() {
		gauge(descOldestEligible, oldest[lane].Seconds(), string(lane))
	}
	scopes, err := l.ScopeCounts(ctx, now)
	if err != nil {
		return err
	}
	gauge(descCooldownsActive, float64(scopes.Cooling))
	gauge(descScopesPaused, float64(scopes.Paused))
	depths, err := ob.Depths(ctx, now)
	if err != nil {
		return err
	}
	gauge(descOutboxPending, float64(depths.Pending))
	gauge(descOutboxDead, float64(depths.Dead))
	gauge(descOutboxOldest, depths.OldestPendingAge.Seconds())
	if err := c.collectRiver(ctx, gauge); err != nil {
		return err
	}
	dup, err := ob.Counter(ctx, outbox.CounterDuplicateKeyConflicts)
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(descDuplicateKey, prometheus.CounterValue, float64(dup))
	batch, err := l.BatchCounts(ctx)
	if err != nil {
		return err
	}
	for _, s := range ledger.ManifestStates() {
		gauge(descBatchManifests, float64(batch.Manifests[s]), string(s))
	}
	for _, s := range ledger.ItemStates() {
		gauge(descBatchItems, float64(batch.Items[s]), string(s))
	}
	gauge(descBatchPartial, float64(batch.PartialCompletions))
	return nil
}

// collectRiver sends River's queue depths: every queue River knows, by
// state (riverDepthStates).
func (c *sharedCollector) collectRiver(ctx context.Context, gauge func(*prometheus.Desc, float64, ...string)) error {
	states := make([]string, len(riverDepthStates))
	for i, s := range riverDepthStates {
		states[i] = string(s)
	}
	rows, err := c.m.cfg.Pool.Query(ctx, qRiverDepth, states)
	if err != nil {
		return fmt.Errorf("reading River's queue depths: %w", err)
	}
	defer rows.Close()
	var queue, state string
	var jobs int64
	for rows.Next() {
		if err := rows.Scan(&queue, &state, &jobs); err != nil {
			return fmt.Errorf("reading River's queue depths: %w", err)
		}
		gauge(descRiverDepth, float64(jobs), queue, state)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading River's queue depths: %w", err)
	}
	return nil
}

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
