package jobs

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/fielderr"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// Defaults of Config. The probes' and admission's defaults, and the
// retention's, are the ledger's (ledger.ProbeTimeoutDefault and the rest).
const (
	ImmediateDeadlineDefault = 15 * time.Minute
	BatchDeadlineDefault     = 24 * time.Hour
	// BatchCompletionBoundDefault is Config.BatchCompletionBound's
	// default.
	BatchCompletionBoundDefault = time.Hour
	ImmediateWorkersDefault     = 10
	BatchWorkersDefault         = 10
	PollIntervalDefault         = 2 * time.Second
	MaxSubmissionsDefault       = 50
	SweepIntervalDefault        = time.Minute
	RetentionEveryDefault       = time.Hour
	// CohortDefault is TenantConfig.Cohort's default.
	CohortDefault = "default"
	// RolloutRefresh is how long a worker keeps a cohort's mode before
	// reading it again: `rollout set` takes effect within it.
	RolloutRefresh = 2 * time.Second
	// RolloutDefaultDefault is Config.RolloutDefault's default: a cohort
	// nobody has set observes.
	RolloutDefaultDefault    = ledger.RolloutObserve
	ShutdownGraceDefault     = 30 * time.Second
	MinConfidenceDefault     = 0.5
	DurationToleranceDefault = 0.15
	DurationSlackDefault     = time.Second
	AudioURLTTLDefault       = time.Hour
	StepTimeoutDefault       = 5 * time.Minute
	RescueAfterDefault       = 6 * time.Minute
	// FetchCooldownDefault: a queue fetches jobs at most this often. A
	// worker freed by a finished job waits up to this long for its next
	// one, so it bounds a queue at MaxWorkers / FetchCooldown jobs a
	// second (20ms and 10 workers: 500/s); each fetch is one statement.
	FetchCooldownDefault = 5 * time.Millisecond
	// FetchCooldownMin is River's lower limit.
	FetchCooldownMin        = time.Millisecond
	QueueImmediate          = "immediate"
	QueueBatch              = "batch"
	ProviderGenericHTTPKind = stt.KindGenericHTTP
)

// TenantConfig is one tenant's speech vendor and validation rules.
type TenantConfig struct {
	// Provider kind: generic-http, openai, deepgram or assemblyai. Required.
	Provider string `yaml:"provider"`
	// BaseURL of the vendor. Default "": the vendor's public API. Plain
	// http is refused unless the host is loopback or AllowInsecureHTTP is
	// set.
	BaseURL string `yaml:"base_url"`
	// AllowInsecureHTTP lets BaseURL use http:// to a host that is not
	// loopback (127.0.0.0/8, ::1, localhost). Default false.
	AllowInsecureHTTP bool `yaml:"allow_insecure_http"`
	// APIKey for the vendor. Never logged.
	APIKey string `yaml:"api_key"`
	// Model asked for when a recording names none. Default "": the adapter's.
	Model string `yaml:"model"`
	// Account labels the vendor account APIKey belongs to, for the
	// throttling scope's name: 1-64 bytes of A-Z a-z 0-9 . _ -. Tenants
	// that share a key share an account. Default "": the host of BaseURL
	// (of the vendor's public API when BaseURL is empty), so that tenants
	// with different keys of one vendor must each be given an account
	// (Validate refuses them otherwise: they would share one scope).
	Account string `yaml:"account"`
	// Scope names the throttling scope (vendor account + model class).
	// Default "": <provider>:<account>:<model>, the model being the
	// adapter's default when Model is empty, so tenants that share an
	// account and a model share a scope. The name shows in recordings'
	// events, metrics and logs: it is never derived from the key.
	Scope string `yaml:"scope"`
	// ImmediateDeadline and BatchDeadline override the lane defaults.
	ImmediateDeadline time.Duration `yaml:"immediate_deadline"`
	BatchDeadline     time.Duration `yaml:"batch_deadline"`
	// MinConfidence a transcript must reach, 0 to 1. Default (nil):
	// MinConfidenceDefault (0.5); 0 holds no transcript back. A vendor
	// that reports none (-1) is not held to it.
	MinConfidence *float64 `yaml:"min_confidence"`
	// Languages allowed (ISO 639-1). Default empty: any.
	Languages []string `yaml:"languages"`
	// TimeZone of the tenant (IANA name) for relative dates in transcripts
	// ("tomorrow", "next Tuesday"). Default "": the call's own offset.
	TimeZone string `yaml:"time_zone"`
	// Retention: how long a terminal recording's history (events,
	// transcript, action sets, deliveries) and audio are kept after its
	// last change. Default 0: Config.Retention. Never "forever".
	Retention time.Duration `yaml:"retention"`
	// Cohort: the rollout cohort the tenant belongs to; its deferral mode
	// (observe or enforce, `callscribe rollout set`) applies to the
	// tenant's requests. Default "default".
	Cohort string `yaml:"cohort"`
	// KeepAudio: the retention purge leaves the audio objects in the
	// recordings root (and records that it did). Default false: removed.
	KeepAudio bool `yaml:"keep_audio"`

	// formerScope is the name WithDefaults derived before accounts, from a
	// hash of the key (<provider>:<first 8 hex of sha256(api key)>:<model>),
	// when it derived Scope: AdoptFormerScopes carries that scope's
	// deferral over to Scope. It is never shown; "" when Scope was set.
	formerScope string
}

// Config configures the pipeline.
type Config struct {
	// Tenants by tenant id. A recording of a tenant not listed is refused
	// at ingest. Not read from YAML with the rest: callscribe's
	// configuration file adds each tenant's CRM to it (pipeline.tenants),
	// so the binary reads that section itself.
	Tenants map[string]TenantConfig `yaml:"-"`
	// ImmediateWorkers and BatchWorkers: River MaxWorkers per queue in
	// each worker process. Defaults 10 and 10.
	ImmediateWorkers int `yaml:"immediate_workers"`
	BatchWorkers     int `yaml:"batch_workers"`
	// ImmediateDeadline and BatchDeadline: how long a recording of each
	// lane may take from ingest before it expires. Defaults 15m and 24h.
	ImmediateDeadline time.Duration `yaml:"immediate_deadline"`
	BatchDeadline     time.Duration `yaml:"batch_deadline"`
	// BatchCompletionBound is how long the batch lane may take to finish a
	// recording (waiting for its manifest, the vendor's batch processing,
	// resubmissions). Ingest routes a recording that names no lane to the
	// immediate lane when its deadline, or its CRM action deadline, is
	// sooner than this; otherwise to the batch lane. Default 1h.
	BatchCompletionBound time.Duration `yaml:"batch_completion_bound"`
	// Batch configures the batch lane's manifests.
	Batch BatchConfig `yaml:"batch"`
	// RolloutDefault is the deferral mode of a cohort that has no stored
	// mode (`callscribe rollout set` stores one): RolloutObserve, so that
	// a new cohort's throttling is recorded before it is enforced, or
	// RolloutEnforce. Default "": ledger.RolloutObserve.
	RolloutDefault ledger.RolloutMode `yaml:"rollout_default"`
	// ObserveOnlyScopes: scopes whose throttling is recorded (the proposed
	// deadline, as an observe-only offer) but not enforced.
	ObserveOnlyScopes []string `yaml:"observe_only_scopes"`
	// PollInterval between polls of an accepted transcription when the
	// vendor gives no Retry-After. Default 2s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// ProbeTimeout: a probe claimed longer ago may be taken over. Default
	// ledger.ProbeTimeoutDefault (1m).
	ProbeTimeout time.Duration `yaml:"probe_timeout"`
	// ProbeWait: how long others wait before asking again while a probe is
	// out. Default ledger.ProbeWaitDefault (1s).
	ProbeWait time.Duration `yaml:"probe_wait"`
	// PausedRecheck: how often a job of a paused scope looks again.
	// Default ledger.PausedRecheckDefault (30s).
	PausedRecheck time.Duration `yaml:"paused_recheck"`
	// MaxSubmissions per recording before it fails. Default 50. Throttled
	// submissions count too; the deadline is the main bound.
	MaxSubmissions int `yaml:"max_submissions"`
	// SweepInterval of the deadline sweep. Default 1m.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// Retention of a tenant without its own (TenantConfig.Retention).
	// Default ledger.RetentionDefault (90 days). Not read from YAML with
	// the rest: callscribe sets it from its ledger section.
	Retention time.Duration `yaml:"-"`
	// RetentionEvery: how often the retention purge runs (a periodic River
	// job). Default RetentionEveryDefault (1h); negative: never (run
	// `callscribe retention run` instead).
	RetentionEvery time.Duration `yaml:"retention_every"`
	// ShutdownGrace: on SIGTERM, running steps get this long to finish
	// before they are cancelled. Default 30s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// DurationTolerance: a transcript's reported duration may differ from
	// the audio's by this fraction plus DurationSlack. Defaults 0.15 and 1s.
	// DurationTolerance (nil: 0.15) may be set to 0: the slack only.
	DurationTolerance *float64      `yaml:"duration_tolerance"`
	DurationSlack     time.Duration `yaml:"duration_slack"`
	// AudioURLTTL: lifetime of signed audio URLs given to vendors. Default 1h.
	AudioURLTTL time.Duration `yaml:"audio_url_ttl"`
	// StepTimeout bounds one run of a job (one vendor call and its
	// bookkeeping). Default 5m.
	StepTimeout time.Duration `yaml:"step_timeout"`
	// RescueAfter: a job left running this long (its worker died) is
	// handed to another worker, which resumes from the ledger. Must exceed
	// StepTimeout. Default 6m.
	RescueAfter time.Duration `yaml:"rescue_after"`
	// FetchCooldown: each queue of a process fetches jobs at most this
	// often (River's FetchCooldown); at least 1ms. Default 5ms.
	FetchCooldown time.Duration `yaml:"fetch_cooldown"`
	// AdmissionMaxAge: no request is sent to a vendor more than this long
	// after the scope read that admitted it without reading the scope
	// again (a wait for the window slot, the vendor lease, the submitted
	// write or a descheduled worker in between): a request whose scope
	// was deferred meanwhile is withdrawn unsent. Default
	// ledger.AdmissionMaxAgeDefault (100ms).
	AdmissionMaxAge time.Duration `yaml:"admission_max_age"`

	// RetryAfter is the timing policy (set from the retry_after section).
	RetryAfter retryafter.Policy `yaml:"-"`
	// Clock tells the time: deadlines, admission, snoozes, the sweep; it is
	// also RetryAfter's clock when that has none. Default (nil): the
	// ledger's clock (Ledger.Clock: the database's, as this process
	// estimates it), so that every worker computes deadlines on one clock.
	Clock clock.Clock `yaml:"-"`
	// Logger receives the pipeline's logs. Default (nil): discard.
	Logger *slog.Logger `yaml:"-"`
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.ImmediateWorkers = cmp.Or(c.ImmediateWorkers, ImmediateWorkersDefault)
	c.BatchWorkers = cmp.Or(c.BatchWorkers, BatchWorkersDefault)
	c.MaxSubmissions = cmp.Or(c.MaxSubmissions, MaxSubmissionsDefault)
	c.ImmediateDeadline = cmp.Or(c.ImmediateDeadline, ImmediateDeadlineDefault)
	c.BatchDeadline = cmp.Or(c.BatchDeadline, BatchDeadlineDefault)
	c.BatchCompletionBound = cmp.Or(c.BatchCompletionBound, BatchCompletionBoundDefault)
	c.Batch.MaxItems = cmp.Or(c.Batch.MaxItems, BatchMaxItemsDefault)
	c.Batch.MaxWait = cmp.Or(c.Batch.MaxWait, BatchMaxWaitDefault)
	c.Batch.FormEvery = cmp.Or(c.Batch.FormEvery, BatchFormEveryDefault)
	c.Batch.PollInterval = cmp.Or(c.Batch.PollInterval, BatchPollIntervalDefault)
	c.Batch.MaxAudioSeconds = cmp.Or(c.Batch.MaxAudioSeconds, BatchMaxAudioSecondsDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.RolloutDefault = cmp.Or(c.RolloutDefault, RolloutDefaultDefault)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, ledger.ProbeTimeoutDefault)
	c.ProbeWait = cmp.Or(c.ProbeWait, ledger.ProbeWaitDefault)
	c.PausedRecheck = cmp.Or(c.PausedRecheck, ledger.PausedRecheckDefault)
	c.SweepInterval = cmp.Or(c.SweepInterval, SweepIntervalDefault)
	c.Retention = cmp.Or(c.Retention, ledger.RetentionDefault)
	c.RetentionEvery = cmp.Or(c.RetentionEvery, RetentionEveryDefault)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, ShutdownGraceDefault)
	c.DurationSlack = cmp.Or(c.DurationSlack, DurationSlackDefault)
	c.AudioURLTTL = cmp.Or(c.AudioURLTTL, AudioURLTTLDefault)
	c.StepTimeout = cmp.Or(c.StepTimeout, StepTimeoutDefault)
	c.RescueAfter = cmp.Or(c.RescueAfter, RescueAfterDefault)
	c.FetchCooldown = cmp.Or(c.FetchCooldown, FetchCooldownDefault)
	c.AdmissionMaxAge = cmp.Or(c.AdmissionMaxAge, ledger.AdmissionMaxAgeDefault)
	c.DurationTolerance = cmp.Or(c.DurationTolerance, new(DurationToleranceDefault))
	c.Clock = cmp.Or[clock.Clock](c.Clock, clock.System{})
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.RetryAfter.Clock = cmp.Or(c.RetryAfter.Clock, c.Clock)
	c.RetryAfter = c.RetryAfter.WithDefaults()
	tenants := make(map[string]TenantConfig, len(c.Tenants))
	for id, t := range c.Tenants {
		tenants[id] = t.WithDefaults()
	}
	c.Tenants = tenants
	return c
}

// WithDefaults returns t with every unset field set to its default; the
// scope derived from its provider, account and model when it names none.
func (t TenantConfig) WithDefaults() TenantConfig {
	t.MinConfidence = cmp.Or(t.MinConfidence, new(MinConfidenceDefault))
	t.Cohort = cmp.Or(t.Cohort, CohortDefault)
	if t.Scope == "" {
		t.Scope = t.Provider + ":" + cmp.Or(t.Account, defaultAccount(t)) + ":" + modelSent(t)
		// Only to find the state kept under the old name.
		h := sha256.Sum256([]byte(t.APIKey))
		t.formerScope = t.Provider + ":" + hex.EncodeToString(h[:4]) + ":" + modelSent(t)
	}
	return t
}

// minConfidence is the confidence t's transcripts must reach.
func (t TenantConfig) minConfidence() float64 {
	return *cmp.Or(t.MinConfidence, new(MinConfidenceDefault))
}

// durationTolerance is c.DurationTolerance, its default when unset.
func (c Config) durationTolerance() float64 {
	return *cmp.Or(c.DurationTolerance, new(DurationToleranceDefault))
}

// Validate reports every problem with c (defaults applied), each a
// *fielderr.Error naming the field by its Go path, e.g.
// Tenants["t1"].MinConfidence.
func (c Config) Validate() error {
	var errs []error
	for _, k := range []struct {
		name string
		v    int
	}{{"ImmediateWorkers", c.ImmediateWorkers}, {"BatchWorkers", c.BatchWorkers}, {"MaxSubmissions", c.MaxSubmissions}} {
		if k.v < 0 {
			errs = append(errs, fielderr.Errorf(k.name, "%d must be positive", k.v))
		}
	}
	if c.FetchCooldown < FetchCooldownMin {
		errs = append(errs, fielderr.Errorf("FetchCooldown", "%s is below River's minimum of %s", c.FetchCooldown, FetchCooldownMin))
	}
	if m := c.RolloutDefault; m != "" && m != ledger.RolloutObserve && m != ledger.RolloutEnforce {
		errs = append(errs, fielderr.Errorf("RolloutDefault", "%q: want observe or enforce", m))
	}
	if c.AdmissionMaxAge < 0 {
		errs = append(errs, fielderr.Errorf("AdmissionMaxAge", "%s must be positive", c.AdmissionMaxAge))
	}
	if c.RescueAfter <= c.StepTimeout {
		errs = append(errs, fielderr.Errorf("RescueAfter", "%s must exceed StepTimeout %s", c.RescueAfter, c.StepTimeout).Refer("StepTimeout"))
	}
	errs = append(errs, fielderr.In(c.Batch.validate(), "Batch"))
	if c.BatchCompletionBound < 0 {
		errs = append(errs, fielderr.Errorf("BatchCompletionBound", "%s must not be negative", c.BatchCompletionBound))
	}
	if d := c.durationTolerance(); d < 0 {
		errs = append(errs, fielderr.Errorf("DurationTolerance", "%g must not be negative", d))
	}
	ids := slices.Sorted(maps.Keys(c.Tenants))
	for _, id := range ids {
		errs = append(errs, fielderr.In(c.Tenants[id].validate(), "Tenants", fielderr.Key(id)))
	}
	errs = append(errs, sharedDefaultScopes(c.Tenants, ids)...)
	if c.Retention < 0 {
		errs = append(errs, fielderr.Errorf("Retention", "%s must be positive", c.Retention))
	}
	errs = append(errs, fielderr.In(c.RetryAfter.Validate(), "RetryAfter"))
	return errors.Join(errs...)
}

// validate reports every problem with the batch lane's settings.
func (b BatchConfig) validate() error {
	var errs []error
	if b.MaxItems < 0 || b.MaxItems > stt.MaxBatchItems {
		errs = append(errs, fielderr.Errorf("MaxItems", "%d must be 1 to %d", b.MaxItems, stt.MaxBatchItems))
	}
	if b.MaxAudioSeconds < 0 {
		errs = append(errs, fielderr.Errorf("MaxAudioSeconds", "%g must not be negative", b.MaxAudioSeconds))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"MaxWait", b.MaxWait}, {"FormEvery", b.FormEvery}, {"PollInterval", b.PollInterval}} {
		if f.d < 0 {
			errs = append(errs, fielderr.Errorf(f.name, "%s must not be negative", f.d))
		}
	}
	return errors.Join(errs...)
}

// validate reports every problem with one tenant.
func (t TenantConfig) validate() error {
	var errs []error
	if !slices.Contains(stt.Kinds(), t.Provider) {
		errs = append(errs, fielderr.Errorf("Provider", "%q is not one of %v", t.Provider, stt.Kinds()))
	}
	if t.TimeZone != "" {
		if _, err := time.LoadLocation(t.TimeZone); err != nil {
			errs = append(errs, fielderr.Errorf("TimeZone", "%v", err))
		}
	}
	if m := t.minConfidence(); m < 0 || m > 1 {
		errs = append(errs, fielderr.Errorf("MinConfidence", "%g is not within 0..1", m))
	}
	if t.Retention < 0 {
		errs = append(errs, fielderr.Errorf("Retention", "%s must be positive (no tenant is kept forever)", t.Retention))
	}
	if t.Account != "" && !validAccount(t.Account) {
		errs = append(errs, fielderr.Errorf("Account", "%q must be 1-64 bytes of A-Z a-z 0-9 . _ -", t.Account))
	}
	return errors.Join(errs...)
}

// defaultAccount is t's account when it names none: the host of its
// vendor's endpoint, or "default" when that does not parse.
func defaultAccount(t TenantConfig) string {
	base := t.BaseURL
	if base == "" {
		switch t.Provider {
		case stt.KindOpenAI:
			base = stt.OpenAIBaseURLDefault
		case stt.KindDeepgram:
			base = stt.DeepgramBaseURLDefault
		case stt.KindAssemblyAI:
			base = stt.AssemblyAIBaseURLDefault
		}
	}
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return strings.ToLower(u.Host)
	}
	return "default"
}

func validAccount(a string) bool {
	if len(a) > 64 {
		return false
	}
	for i := 0; i < len(a); i++ {
		switch c := a[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return a != ""
}

// sharedDefaultScopes refuses tenants whose derived scope is one but whose
// keys differ: different vendor accounts would hold each other back (or
// one account's throttling would not hold back its own requests). Each
// must name its account. The keys are compared here and never printed.
func sharedDefaultScopes(tenants map[string]TenantConfig, ids []string) []error {
	first := map[string]string{} // scope -> the first tenant deriving it
	var errs []error
	for _, id := range ids {
		t := tenants[id]
		if t.formerScope == "" || t.Account != "" {
			continue
		}
		prev, ok := first[t.Scope]
		if !ok {
			first[t.Scope] = id
			continue
		}
		if tenants[prev].APIKey != t.APIKey {
			errs = append(errs, fielderr.In(fielderr.Errorf("Account", "tenants %s and %s use different %s keys and would share the throttling scope %q: give each key's tenants an account label (Account)",
				prev, id, t.Provider, t.Scope).Refer("Account"), "Tenants", fielderr.Key(id)))
		}
	}
	return errs
}

// modelSent is the model t's requests ask for when a recording names
// none: its own, else its adapter's default (as stt.New resolves it).
func modelSent(t TenantConfig) string {
	if t.Model != "" {
		return t.Model
	}
	switch t.Provider {
	case stt.KindGenericHTTP:
		return stt.GenericHTTPModelDefault
	case stt.KindOpenAI:
		return stt.OpenAIModelDefault
	case stt.KindDeepgram:
		return stt.DeepgramModelDefault
	case stt.KindAssemblyAI:
		return stt.AssemblyAIModelDefault
	}
	return ""
}

// deadlineFor is the deadline of a recording of tenant t on lane, ingested at now.
func (c Config) deadlineFor(t TenantConfig, lane ledger.Lane, now time.Time) time.Time {
	if lane == ledger.LaneImmediate {
		if t.ImmediateDeadline > 0 {
			return now.Add(t.ImmediateDeadline)
		}
		return now.Add(c.ImmediateDeadline)
	}
	if t.BatchDeadline > 0 {
		return now.Add(t.BatchDeadline)
	}
	return now.Add(c.BatchDeadline)
}

func queueFor(lane ledger.Lane) string {
	if lane == ledger.LaneImmediate {
		return QueueImmediate
	}
	return QueueBatch
}
