package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger"
)

// Defaults of Config.
const (
	MaxTenantLabelsDefault = 20
	ScrapeTimeoutDefault   = 5 * time.Second
)

// Config configures the metrics of one process.
type Config struct {
	// Pool, when set, is the database the scrape-time gauges are read
	// from: through the ledger's API (oldest eligible recording by lane,
	// active and paused cooldowns, the batch lane), the outbox's (its
	// backlog, the duplicate-key counter) and River's tables (queue
	// depth), one query per family of gauges. They are global: give a
	// Pool to one process only (or aggregate them with max). Default nil:
	// none exported.
	Pool *pgxpool.Pool
	// Capacity, when set, is read at each scrape for the vendors' capacity
	// gauges (a *capacity.Leases). Global, like Pool's. Default nil: none.
	Capacity CapacityStatus
	// Gate, when set, is the admission gate whose figures are exported
	// (a *live.Gate): its tickets held, read from Redis at each scrape
	// (global, shared by every process with the gate), and this process's
	// waiting calls, admissions, rejections, reclaimed tickets and waits.
	// Default nil: none.
	Gate GateSource
	// FailOpen counts this process's grants made without Redis, by
	// component ("leases", "slots", "windows", "gate": the Uncounted
	// method of capacity.Leases, Slots, Windows and live.Gate). Per
	// process. Default nil: none.
	FailOpen map[string]func() int64
	// AuthFailures, when set, counts this process's refused API tokens
	// (tokens.Store.Failures). Per process. Default nil: not exported.
	AuthFailures func() uint64
	// AuthCacheAccepted, when set, counts this process's tokens accepted
	// by the token cache, by source ("cache", "stale", "database":
	// auth.Cache.Accepted). Per process. Default nil: not exported.
	AuthCacheAccepted map[string]func() uint64
	// LimitAlertWebhook, when set, counts this process's learned-limit
	// alerts by webhook outcome (delivered, failed, dropped).
	LimitAlertWebhook map[string]func() int64
	// Cooldowns, when set, is read at each scrape for the exact accounting
	// of the last CooldownWindow's submissions against cooldowns: how many
	// ignored a cooldown their admission knew of (must stay 0) and how
	// many were in flight when a later one was announced
	// (ledger.Ledger.SubmissionAccounting). Global, like Pool's. Default
	// nil: not exported.
	Cooldowns func(ctx context.Context, since time.Time) (ignored, inFlight int, err error)
	// ReplayRuns, when set, is read at each scrape for the figures of the
	// replay runs still active (enumerating or running: outbox.Outbox's
	// ReplayRuns), a gauge per figure and run labelled run and target,
	// and callscribe_replay_runs_active. Global, like Pool's. Default nil:
	// not exported.
	ReplayRuns func(ctx context.Context) ([]ReplayRun, error)
	// MaxTenantLabels: how many distinct tenants keep their name in a
	// tenant label; the rest are "other". Default 0:
	// MaxTenantLabelsDefault (20); negative: none (every tenant "other").
	MaxTenantLabels int
	// ScrapeTimeout bounds the database and Redis reads of one scrape.
	// Default 0: ScrapeTimeoutDefault (5s).
	ScrapeTimeout time.Duration
	// Clock measures ages and durations. Default nil: clock.System.
	Clock clock.Clock
}

// CapacityStatus reads the vendors' concurrency: *capacity.Leases.
type CapacityStatus interface {
	Status(ctx context.Context) ([]capacity.ProviderStatus, error)
}

// Metrics holds callscribe's registry and every metric. Its recording
// methods satisfy jobs.Metrics and outbox.Metrics; a nil *Metrics records
// nothing.
type Metrics struct {
	cfg     Config
	reg     *prometheus.Registry
	tenants *TenantLabels

	vendorThrottled *prometheus.CounterVec
	vendorFailed    *prometheus.CounterVec
	billable        *prometheus.CounterVec
	committed       *prometheus.CounterVec
	submissions     prometheus.Histogram
	receiptCommit   *prometheus.HistogramVec
	cooldown        *prometheus.HistogramVec
	crmThrottled    *prometheus.CounterVec
	crmSettled      *prometheus.CounterVec
	receiptCRM      prometheus.Histogram
	limitLearned    *prometheus.CounterVec
	scrapeErrors    *prometheus.CounterVec
	admissionGap    *prometheus.HistogramVec
	rechecks        *prometheus.CounterVec
	workers         *workerOccupancy
	// collectors are those registered in reg, for Describe.
	collectors []prometheus.Collector
}

// register registers cs in the process's registry.
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.collectors = append(m.collectors, cs...)
}

// Describe sends the description of every metric family the registry
// exports, those without a series yet included (a labelled family appears
// in a scrape only once it has one): what dashboards and alert rules may
// name.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors {
		c.Describe(ch)
	}
}

// CooldownWindow is how far back the scrape's exact cooldown accounting
// (Config.Cooldowns) looks.
const CooldownWindow = time.Hour

// Buckets of the histograms.
var (
	// SubmissionsBuckets: submissions to the speech vendor per committed
	// transcript.
	SubmissionsBuckets = []float64{1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50}
	// CooldownBuckets: seconds a scope's deadline was moved ahead by.
	CooldownBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600}
	// LatencyBuckets: seconds from receipt (ingest) to the commit of a
	// transcript's actions, or to their delivery in the CRM.
	LatencyBuckets = []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400}
	// GapBuckets: seconds from the scope read that admitted a request to
	// its sending.
	GapBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

// New returns the metrics of one process, registered in a registry of
// their own with the Go runtime and process collectors.
func New(cfg Config) *Metrics {
	if cfg.MaxTenantLabels == 0 {
		cfg.MaxTenantLabels = MaxTenantLabelsDefault
	}
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = ScrapeTimeoutDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry(), tenants: NewTenantLabels(cfg.MaxTenantLabels), workers: newWorkerOccupancy()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m.vendorThrottled = counter("callscribe_vendor_throttled_total",
		"Throttled answers of speech vendors (429, or 503 with a timing signal), by provider, throttling scope and HTTP status. Per process.",
		"provider", "scope", "status")
	m.vendorFailed = counter("callscribe_vendor_failed_attempts_total",
		"Requests to speech vendors that failed without a transcript and were not throttling (transient, permanent, quota_exhausted), by provider and outcome. Per process.",
		"provider", "outcome")
	m.billable = counter("callscribe_billable_audio_seconds_total",
		"Seconds of audio transcribed (the vendor's reported duration, else the measured one), by provider and tenant (tenants past the configured count are \"other\"). Per process.",
		"provider", "tenant")
	m.committed = counter("callscribe_transcripts_committed_total",
		"Transcripts whose actions were committed to the outbox, by tenant (tenants past the configured count are \"other\"). Per process.",
		"tenant")
	m.submissions = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "callscribe_submissions_per_transcript",
		Help:    "Submissions to the speech vendor per committed transcript (the ledger's attempt count at commit), observed once per commit. Per process.",
		Buckets: SubmissionsBuckets})
	m.receiptCommit = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "callscribe_receipt_to_commit_seconds",
		Help:    "Seconds from a recording's receipt (ingest) to the commit of its actions for the CRM, by lane. Per process.",
		Buckets: LatencyBuckets}, []string{"lane"})
	m.cooldown = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "callscribe_scope_cooldown_seconds",
		Help:    "Seconds a throttling scope's deadline was moved ahead to (deadline minus now) each time a throttled answer moved it, by kind (stt, crm). Per process.",
		Buckets: CooldownBuckets}, []string{"kind"})
	m.crmThrottled = counter("callscribe_crm_throttled_total",
		"Throttled answers of CRMs, by target, throttling scope and HTTP status. Per process.",
		"target", "scope", "status")
	m.crmSettled = counter("callscribe_crm_deliveries_total",
		"Outbox rows settled, by a delivery try or by their deadline, by target and state (delivered, dead). Per process.",
		"target", "state")
	m.receiptCRM = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "callscribe_receipt_to_crm_seconds",
		Help:    "Seconds from a recording's receipt (ingest) to the CRM's acceptance of its action set. Per process.",
		Buckets: LatencyBuckets})
	m.scrapeErrors = counter("callscribe_scrape_errors_total",
		"Scrapes that could not read a source of gauges (database, capacity, gate); those gauges were left out.",
		"source")
	m.limitLearned = counter("callscribe_capacity_learned_limit_alerts_total",
		"Learned-limit alerts: a vendor refused a stream below the limit in force and the limit was lowered, by provider and kind. Per process.",
		"provider", "kind")
	m.admissionGap = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "callscribe_admission_send_gap_seconds",
		Help:    "Seconds from the scope read that admitted a request to a speech vendor to its sending, by kind (stt). Per process.",
		Buckets: GapBuckets}, []string{"kind"})
	m.rechecks = counter("callscribe_admission_rechecks_total",
		"Admissions older than the allowed age read again just before sending, by outcome (admitted, refused: the request was withdrawn or its manifest waits). Per process.",
		"outcome")
	m.register(m.limitLearned, m.admissionGap, m.rechecks)
	for outcome, f := range cfg.LimitAlertWebhook {
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_capacity_alert_webhook_total",
			Help:        "Learned-limit alerts by what became of them at the alert webhook: delivered, failed (every try failed), dropped (the bounded queue was full). Per process.",
			ConstLabels: prometheus.Labels{"outcome": outcome}}, func() float64 { return float64(f()) }))
	}
	m.register(m.vendorThrottled, m.vendorFailed, m.billable, m.committed, m.submissions, m.receiptCommit, m.cooldown,
		m.crmThrottled, m.crmSettled, m.receiptCRM, m.workers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for component, f := range cfg.FailOpen {
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_capacity_fail_open_total",
			Help:        "Capacity grants made without counting them because Redis could not be reached, by component. Per process.",
			ConstLabels: prometheus.Labels{"component": component}}, func() float64 { return float64(f()) }))
	}
	m.register(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_group_commit_groups_total",
			Help: "Group transactions committed: each holds the steps of many recordings (submissions, transcripts, delivery tries and settlements). Per process."},
			func() float64 { return float64(ledger.ProcessCommitStats().Groups) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_group_commit_steps_total",
			Help: "Steps committed in group transactions; divided by callscribe_group_commit_groups_total, the steps per commit. Per process."},
			func() float64 { return float64(ledger.ProcessCommitStats().Items) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_group_commit_alone_total",
			Help: "Steps written again alone after their group rolled back (a step's error, a deadlock between groups). Per process."},
			func() float64 { return float64(ledger.ProcessCommitStats().Alone) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_group_commit_merged_steps_total",
			Help: "Steps of committed groups whose statement was merged with other steps' of their kind (one statement for a round's recording moves, one for its delivery tries, one for its settlements). Per process."},
			func() float64 { return float64(ledger.ProcessCommitStats().Merged) }))
	if f := cfg.AuthFailures; f != nil {
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_auth_failures_total",
			Help: "API requests refused for a missing, unknown, wrong or revoked token. Per process."},
			func() float64 { return float64(f()) }))
	}
	for source, f := range cfg.AuthCacheAccepted {
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callscribe_auth_cache_hits_total",
			Help:        "API tokens accepted by the token cache (the capacity API's, /metrics'), by source: cache (in step with the database), stale (from the cache while the database cannot be reached), database (not cached yet, looked up). Per process.",
			ConstLabels: prometheus.Labels{"source": source}}, func() float64 { return float64(f()) }))
	}
	if cfg.Pool != nil || cfg.Capacity != nil || cfg.Cooldowns != nil || cfg.ReplayRuns != nil || cfg.Gate != nil {
		m.register(&sharedCollector{m: m})
	}
	return m
}

// LimitLearned counts a learned-limit alert of provider/kind (wire it to
// capacity.Config.OnLimitLearned).
func (m *Metrics) LimitLearned(provider, kind string) {
	m.limitLearned.WithLabelValues(provider, kind).Inc()
}

// Handler serves the registry in the Prometheus exposition format (mount
// it at /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry, for a caller's own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Tenant is tenant's bounded label (TenantLabels).
func (m *Metrics) Tenant(tenant string) string { return m.tenants.Label(tenant) }

// VendorThrottled counts a speech vendor's throttled answer.
func (m *Metrics) VendorThrottled(provider, scope string, status int) {
	if m == nil {
		return
	}
	m.vendorThrottled.WithLabelValues(provider, scope, strconv.Itoa(status)).Inc()
}

// VendorFailed counts a request to a speech vendor that failed with
// outcome (transient, permanent, quota_exhausted).
func (m *Metrics) VendorFailed(provider, outcome string) {
	if m == nil {
		return
	}
	m.vendorFailed.WithLabelValues(provider, outcome).Inc()
}

// VendorCooldown observes a speech vendor scope's deadline moved ahead by
// length.
func (m *Metrics) VendorCooldown(_ string, length time.Duration) {
	if m == nil {
		return
	}
	m.cooldown.WithLabelValues("stt").Observe(max(length, 0).Seconds())
}

// BillableAudio counts seconds of audio a provider transcribed for tenant.
func (m *Metrics) BillableAudio(provider, tenant string, seconds float64) {
	if m == nil || seconds <= 0 {
		return
	}
	m.billable.WithLabelValues(provider, m.tenants.Label(tenant)).Add(seconds)
}

// Committed observes a transcript whose actions were committed: its
// tenant, lane, submissions to the vendor and time since receipt.
func (m *Metrics) Committed(tenant, lane string, submissions int, receiptToCommit time.Duration) {
	if m == nil {
		return
	}
	m.committed.WithLabelValues(m.tenants.Label(tenant)).Inc()
	m.submissions.Observe(float64(submissions))
	m.receiptCommit.WithLabelValues(lane).Observe(max(receiptToCommit, 0).Seconds())
}

// AdmissionGap observes a request to scope's speech vendor sent gap after
// the scope read that admitted it.
func (m *Metrics) AdmissionGap(_ string, gap time.Duration) {
	if m == nil {
		return
	}
	m.admissionGap.WithLabelValues("stt").Observe(max(gap, 0).Seconds())
}

// AdmissionRechecked counts an admission read again just before sending.
func (m *Metrics) AdmissionRechecked(_ string, refused bool) {
	if m == nil {
		return
	}
	outcome := "admitted"
	if refused {
		outcome = "refused"
	}
	m.rechecks.WithLabelValues(outcome).Inc()
}

// CRMThrottled counts a CRM's throttled answer.
func (m *Metrics) CRMThrottled(target, scope string, status int) {
	if m == nil {
		return
	}
	m.crmThrottled.WithLabelValues(target, scope, strconv.Itoa(status)).Inc()
}

// CRMCooldown observes a CRM scope's deadline moved ahead by length.
func (m *Metrics) CRMCooldown(_ string, length time.Duration) {
	if m == nil {
		return
	}
	m.cooldown.WithLabelValues("crm").Observe(max(length, 0).Seconds())
}

// CRMSettled counts an outbox row settled as state (delivered, dead) by a
// try; for a delivered row, receiptToCRM (when positive) is the time from
// its recording's receipt.
func (m *Metrics) CRMSettled(target, state string, receiptToCRM time.Duration) {
	if m == nil {
		return
	}
	m.crmSettled.WithLabelValues(target, state).Inc()
	if state == "delivered" && receiptToCRM > 0 {
		m.receiptCRM.Observe(receiptToCRM.Seconds())
	}
}
