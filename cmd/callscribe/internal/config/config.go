package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/fielderr"
	"github.com/callscribe/callscribe/internal/lazylog"
	"github.com/callscribe/callscribe/internal/vendorhttp"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
	"github.com/callscribe/callscribe/outbox"
)

// Defaults of the configuration keys. README.md's configuration table lists
// the same keys; TestConfigDocumented keeps the two in step.
const (
	LogLevelDefault  = "info"
	LogFormatDefault = "auto"
	RunAsUserDefault = "postgres"
	EnvDatabaseURL   = "CALLSCRIBE_DATABASE_URL"
	EnvRedisURL      = "CALLSCRIBE_REDIS_URL"
	// EnvAPIToken, when set, is the bearer token every request to
	// `callscribe serve` must carry. Unset: no authentication.
	EnvAPIToken = "CALLSCRIBE_API_TOKEN"
	// EnvDefaultOrgLimit is the concurrent-call cap of an organisation not
	// listed in capacity.orgs when capacity.org_limit is not set. Unlike
	// the URLs, the configuration file wins over it: explicit
	// capacity.org_limit, then this variable, then capacity.OrgLimitDefault.
	EnvDefaultOrgLimit = "DEFAULT_ORG_CONCURRENCY_LIMIT"
)

// Config is everything callscribe reads at start. Sources, later wins:
// defaults, the YAML file named by --config, the environment. The
// packages' configurations are read as they are (ledger.Config,
// retryafter.Policy, jobs.Config through their yaml tags), each validated
// by its own Validate; their errors name the file's keys.
type Config struct {
	// DatabaseURL of PostgreSQL. Environment: CALLSCRIBE_DATABASE_URL.
	// Default "": start a throwaway cluster from the machine's PostgreSQL
	// binaries, removed on exit (first run and demo only).
	DatabaseURL string `yaml:"database_url"`
	// RedisURL of Redis (redis:// rediss:// unix://). Environment:
	// CALLSCRIBE_REDIS_URL. Default "": an in-process Redis (miniredis).
	RedisURL string `yaml:"redis_url"`

	Log              LogConfig              `yaml:"log"`
	EmbeddedPostgres EmbeddedPostgresConfig `yaml:"embedded_postgres"`
	// Ledger: the durable record (retention).
	Ledger ledger.Config `yaml:"ledger"`
	// RetryAfter: the timing policy for throttled vendors and CRMs.
	RetryAfter retryafter.Policy `yaml:"retry_after"`
	// Audio: where recordings are read from. Default root "": the working
	// directory.
	Audio audio.Config `yaml:"audio"`
	// Pipeline: tenants, queues, deadlines, probes (see jobs.Config), and
	// each tenant's CRM.
	Pipeline PipelineConfig `yaml:"pipeline"`
	// Capacity: vendor concurrency limits shared by live calls and the
	// pipeline (needs a lasting Redis: redis_url).
	Capacity CapacityConfig `yaml:"capacity"`
	// CRMTargets are named CRM targets for `callscribe replay --target NAME`
	// (a staging CRM, say), each with its own throttling scope (default
	// crm:replay:<name>). One marked production: true is refused unless
	// --allow-production is given.
	CRMTargets map[string]CRMConfig `yaml:"crm_targets"`
	// Replay: the replay queue's workers and chunk size.
	Replay ReplayConfig `yaml:"replay"`
	// Metrics: the Prometheus metrics at /metrics.
	Metrics MetricsConfig `yaml:"metrics"`
	// StatusPage: serve's status page at /.
	StatusPage StatusPageConfig `yaml:"status_page"`
	// Tokens: serve's cache of the API tokens, through which the capacity
	// API checks its requests without waiting on PostgreSQL.
	Tokens auth.CacheConfig `yaml:"tokens"`

	// exposed is set when the file holds a secret inline and others can
	// read it (see LogWarnings).
	exposed *exposedSecrets
}

// ReplayConfig is the replay section.
type ReplayConfig struct {
	// Workers: River MaxWorkers of the replay queue in each process that
	// works it (serve, worker, replay --wait). Default 4.
	Workers int `yaml:"workers"`
	// Chunk: recordings a replay run enqueues per transaction. Default
	// 500.
	Chunk int `yaml:"chunk"`
}

// ReplayTargetScope is the default scope of replay target name.
func ReplayTargetScope(name string) string { return "crm:replay:" + name }

// MetricsConfig is the metrics section.
type MetricsConfig struct {
	// MaxTenantLabels: how many distinct tenants keep their id in a metric's
	// tenant label, the rest being "other". Default 0:
	// metrics.MaxTenantLabelsDefault (20); negative: every tenant "other".
	MaxTenantLabels int `yaml:"max_tenant_labels"`
}

// StatusPageConfig is the status_page section.
type StatusPageConfig struct {
	// SecureCookies: when the session cookie is marked Secure. auto: when
	// the request reached serve over TLS (X-Forwarded-Proto is not
	// trusted); always: always, for serve behind a proxy that ends TLS
	// (the page's own origin is then https); never: never. Default "auto".
	SecureCookies string `yaml:"secure_cookies"`
}

// exposedSecrets: a configuration file readable by group or others that
// holds secrets inline.
type exposedSecrets struct {
	file string
	mode fs.FileMode
	keys []string // the keys holding them, never their values
}

// PipelineConfig is the pipeline section: jobs.Config, whose tenants also
// name the CRM their action sets are delivered to.
type PipelineConfig struct {
	jobs.Config `yaml:",inline"`
	// Tenants by tenant id (jobs.Config.Tenants with their CRM).
	Tenants map[string]TenantConfig `yaml:"tenants"`
}

// TenantConfig is one tenant: its speech vendor and validation rules
// (jobs.TenantConfig) and its CRM.
type TenantConfig struct {
	jobs.TenantConfig `yaml:",inline"`
	// APIKeyFile names a file holding the vendor key (api_key), read at
	// start, trailing line breaks removed; a relative path is relative to
	// the working directory. Default "": the key is api_key. Setting both
	// is an error.
	APIKeyFile string `yaml:"api_key_file"`
	// CRM is where the tenant's action sets are delivered. Kind "": none
	// (action sets are committed, nothing is delivered).
	CRM CRMConfig `yaml:"crm"`
}

// CRMConfig is a CRM target (see crm/connector.Config), the throttling
// scope of its integration and how long a delivery to it may stay pending.
type CRMConfig struct {
	connector.Config `yaml:",inline"`
	// Scope of the CRM integration's throttling. Default
	// crm:<tenant>:<kind> for a tenant's CRM, crm:replay:<name> for a
	// crm_targets entry (which may not use a tenant's).
	Scope string `yaml:"scope"`
	// DeliveryDeadline: a delivery to a tenant's CRM still pending this
	// long after its commit (or after an operator's `outbox retry`) goes
	// to dead; a replay delivery to a crm_targets entry, this long after
	// its run enqueued it. Default 0: outbox.DeliveryDeadlineDefault
	// (24h). Must not be negative.
	DeliveryDeadline time.Duration `yaml:"delivery_deadline"`
	// TokenFile names a file holding the token (token), read at start,
	// trailing line breaks removed; a relative path is relative to the
	// working directory. Default "": the token is token. Setting both is
	// an error.
	TokenFile string `yaml:"token_file"`
}

// CapacityConfig configures the vendor slot counters.
type CapacityConfig struct {
	// Limits per "provider/kind" (kind stt or tts): the plan's concurrent
	// streams and how many of them batch work may not take (kept for live
	// calls). A provider without a limit is not counted.
	Limits map[string]CapacityLimit `yaml:"limits"`
	// LeaseSTT, LeaseTTS: lease lengths. Defaults 90s and 60s.
	LeaseSTT time.Duration `yaml:"lease_stt"`
	LeaseTTS time.Duration `yaml:"lease_tts"`
	// HeartbeatEvery: how often a process refreshes its leases. Default 20s.
	HeartbeatEvery time.Duration `yaml:"heartbeat_every"`
	// PeakRetention: how long per-minute peaks are kept. Default 24h.
	PeakRetention time.Duration `yaml:"peak_retention"`
	// OrgLimit: concurrent calls of an organisation not listed in Orgs
	// (or listed without a limit). Environment: DEFAULT_ORG_CONCURRENCY_LIMIT,
	// used only when this key is not set. Default 0: 10
	// (capacity.OrgLimitDefault). Must be positive when set.
	OrgLimit int `yaml:"org_limit"`
	// OrgLeaseShare: the share of each provider/kind's limit one
	// organisation's token may hold at once through POST /v1/leases, in
	// (0, 1]. Default 0: 0.5 (httpapi.OrgLeaseShareDefault).
	OrgLeaseShare float64 `yaml:"org_lease_share"`
	// MaxDialWaiters: dial long-polls that may wait at once in a serve
	// process; more get 429. Default 0: 128 (httpapi.DialWaitersDefault).
	MaxDialWaiters int `yaml:"max_dial_waiters"`
	// RedisTimeout bounds each Redis round trip of the vendor leases,
	// windows, dial queue and timelines before the step fails open.
	// Default 0: 250ms (capacity.OpTimeoutDefault).
	RedisTimeout time.Duration `yaml:"redis_timeout"`
	// RedisAdmitTimeout bounds each Redis round trip of the call slots,
	// caller IDs and call starts before they fail open. Default 0: 1s
	// (capacity.AdmitOpTimeoutDefault).
	RedisAdmitTimeout time.Duration `yaml:"redis_admit_timeout"`
	// Orgs: per-organisation call caps of the call slots `callscribe serve`
	// hands out. Default none: every organisation gets OrgLimit concurrent
	// calls and every campaign 5 (lowered to its organisation's cap).
	Orgs map[string]CapacityOrg `yaml:"orgs"`
	// CapsRefresh: how often `callscribe serve` re-reads the caps stored
	// at run time (`callscribe orgs set`, `campaigns set`), which override
	// Orgs. Default 0: 2s (orgcap.EveryDefault); at least 10ms.
	CapsRefresh time.Duration `yaml:"caps_refresh"`
	// Agents: each agent's providers, primary first, then fallbacks, used
	// by `callscribe serve` for POST /v1/calls/{id}/transcriber. Default none.
	Agents map[string]CapacityAgent `yaml:"agents"`
	// Window: the adaptive concurrency window of each throttling scope
	// (kept in Redis, shared by every worker).
	Window CapacityWindow `yaml:"window"`
	// StartRate: calls started per second per campaign of an organisation
	// and per organisation across its campaigns, for POST /v1/calls:start.
	StartRate CapacityStartRate `yaml:"start_rate"`
	// Gate: the admission gate of POST /v1/gate/enter, shared in Redis by
	// every serve process with a gate of its name.
	Gate CapacityGate `yaml:"gate"`
	// Alerts: where learned-limit alerts are sent besides the log.
	Alerts CapacityAlerts `yaml:"alerts"`
}

// CapacityStartRate configures the call start rate.
type CapacityStartRate struct {
	// Default: starts per second of a campaign not listed, 1–20.
	// Default 0: 1.
	Default int `yaml:"default"`
	// Campaigns: organisation, then campaign, to its starts per second,
	// 1–20. Default none.
	Campaigns map[string]map[string]int `yaml:"campaigns"`
	// OrgDefault: starts per second, 0–1000, of an organisation not
	// listed in Orgs, across all its campaigns (and its calls without
	// one), counted beside each campaign's own rate. Default 0: no
	// organisation rate, each campaign only its own (as before this key).
	OrgDefault int `yaml:"org_default"`
	// Orgs: organisation to its starts per second across its campaigns,
	// 1–1000. Default none.
	Orgs map[string]int `yaml:"orgs"`
}

// CapacityGate configures serve's admission gate. Size 0: no gate.
type CapacityGate struct {
	// Name: the gate's name; serve processes whose gates share a name
	// (and Redis) share its tickets. Default "": calls.
	Name string `yaml:"name"`
	// Size: calls inside the gate at once over every serve process, below
	// every ceiling.
	Size int `yaml:"size"`
	// Ceilings: the pools behind the gate and their sizes (vendor plan
	// concurrency, trunk channels, ...).
	Ceilings map[string]int `yaml:"ceilings"`
	// Timeout: how long an enter waits by default. Default 4s.
	Timeout time.Duration `yaml:"timeout"`
	// TicketTTL: a ticket not left by then is reclaimed. Default 20m.
	TicketTTL time.Duration `yaml:"ticket_ttl"`
}

// CapacityAlerts configures where learned-limit alerts go.
type CapacityAlerts struct {
	// WebhookURL: POSTed a JSON alert for each learned limit. Default "": none.
	WebhookURL string `yaml:"webhook_url"`
	// WebhookToken: bearer token of the webhook; never logged.
	WebhookToken string `yaml:"webhook_token"`
	// WebhookTokenFile: file holding WebhookToken; set one, not both.
	WebhookTokenFile string `yaml:"webhook_token_file"`
}

// CapacityWindow tunes the scopes' concurrency windows. Zero fields take
// capacity's defaults.
type CapacityWindow struct {
	// Disabled: no window; admission is the scope's deadline and probe
	// only. Default false.
	Disabled bool `yaml:"disabled"`
	// ImmediateShare: the share of a window batch work may not take.
	// Default 0.25; negative: none.
	ImmediateShare float64 `yaml:"immediate_share"`
	// StartTarget: where a new scope's slow start stops when its provider
	// has no configured limit. Default 4.
	StartTarget int `yaml:"start_target"`
	// GrowRounds: full windows of successes (while full, since the last
	// change) before growing by one above
	// the size it had. Default 4.
	GrowRounds int `yaml:"grow_rounds"`
	// Strikes: overloads in a row at a level that had succeeded before it
	// shrinks. Default 3.
	Strikes int `yaml:"strikes"`
	// CeilingRetry: how long a size that drew an overload is not tried
	// again (doubling while it keeps failing). Default 5s.
	CeilingRetry time.Duration `yaml:"ceiling_retry"`
	// ReleaseLinger: how long a release that went well may wait in its
	// process for the scope's next acquire, which gives it back in the
	// same script. Default 5ms; negative: every release goes at once; at
	// most 1s.
	ReleaseLinger time.Duration `yaml:"release_linger"`
}

// CapacityAgent is one agent's speech providers, primary first.
type CapacityAgent struct {
	STT []string `yaml:"stt"`
	TTS []string `yaml:"tts"`
}

// CapacityOrg is one organisation's call caps.
type CapacityOrg struct {
	// Limit: concurrent calls. Default 0: 10.
	Limit int `yaml:"limit"`
	// Campaigns: campaign name to its cap, 1–20 and not above Limit.
	Campaigns map[string]int `yaml:"campaigns"`
}

// CapacityLimit is one provider/kind's limit.
type CapacityLimit struct {
	Limit        int `yaml:"limit"`
	BatchReserve int `yaml:"batch_reserve"`
}

// LogConfig configures the structured log on stderr.
type LogConfig struct {
	// Level: debug, info, warn or error. Default "info".
	Level string `yaml:"level"`
	// Format: text, json, or auto: json when stderr is not a terminal (a
	// service's log, read by a collector), text when it is. Default "auto".
	Format string `yaml:"format"`
}

// EmbeddedPostgresConfig configures the throwaway cluster used when no
// database URL is set.
type EmbeddedPostgresConfig struct {
	// BinDir holding initdb and postgres. Default "": found through
	// `pg_config --bindir`, PATH, then /usr/lib/postgresql/*/bin.
	BinDir string `yaml:"bin_dir"`
	// RunAsUser: the unprivileged OS user the cluster runs as when
	// callscribe runs as root. Default "postgres".
	RunAsUser string `yaml:"run_as_user"`
}

// PipelineConfig is the pipeline section with the timing policy added.
func (c Config) PipelineConfig() jobs.Config {
	p := c.pipelineOnly()
	p.RetryAfter = c.RetryAfter
	p.Retention = c.Ledger.Retention
	return p
}

// pipelineOnly is the pipeline section as jobs.Config, without what other
// sections set (the timing policy, the retention), so that validating it
// reports only the pipeline section's own problems.
func (c Config) pipelineOnly() jobs.Config {
	p := c.Pipeline.Config
	if c.Pipeline.Tenants != nil {
		p.Tenants = make(map[string]jobs.TenantConfig, len(c.Pipeline.Tenants))
		for id, t := range c.Pipeline.Tenants {
			p.Tenants[id] = t.TenantConfig
		}
	}
	return p
}

// TenantCRMs are the tenants' CRMs by tenant id, each scope defaulted;
// tenants without a CRM are left out.
func (c Config) TenantCRMs() map[string]CRMConfig {
	out := map[string]CRMConfig{}
	for id, t := range c.Pipeline.Tenants {
		if t.CRM.Kind == "" {
			continue
		}
		if t.CRM.Scope == "" {
			t.CRM.Scope = "crm:" + id + ":" + t.CRM.Kind
		}
		out[id] = t.CRM
	}
	return out
}

// WithDefaults returns c with every zero field of the file's set to its
// default: the binary's own, and those of the packages' configurations
// (from their WithDefaults). What a file cannot set (clocks, loggers) is
// left for the packages to default where they are used.
func (c Config) WithDefaults() Config {
	c.Log.Level = cmp.Or(c.Log.Level, LogLevelDefault)
	c.Log.Format = cmp.Or(c.Log.Format, LogFormatDefault)
	c.EmbeddedPostgres.RunAsUser = cmp.Or(c.EmbeddedPostgres.RunAsUser, RunAsUserDefault)
	c.StatusPage.SecureCookies = cmp.Or(c.StatusPage.SecureCookies, string(status.SecureAuto))
	c.Ledger.Retention = c.Ledger.WithDefaults().Retention
	tc := c.Tokens.WithDefaults()
	c.Tokens.RefreshEvery, c.Tokens.LookupTimeout = tc.RefreshEvery, tc.LookupTimeout
	p := c.RetryAfter.WithDefaults()
	c.RetryAfter.BaseBackoff, c.RetryAfter.MaxBackoff, c.RetryAfter.MaxDelay = p.BaseBackoff, p.MaxBackoff, p.MaxDelay
	return c
}

// Validate reports every problem with c, each once, naming its key in the
// configuration file: the packages' configurations are validated by their
// own Validate, whose field errors (Go paths) are named by the yaml tags.
func (c Config) Validate() error {
	errs := []error{
		c.validateOwn(),
		fielderr.In(c.Ledger.Validate(), "Ledger"),
		fielderr.In(c.RetryAfter.Validate(), "RetryAfter"),
		fielderr.In(c.Tokens.WithDefaults().Validate(), "Tokens"),
		fielderr.In(c.pipelineOnly().WithDefaults().Validate(), "Pipeline"),
		outboxPaths(c.outboxOnly().WithDefaults().Validate()),
	}
	return inYAML(reflect.TypeFor[Config](), errors.Join(errs...))
}

// outboxOnly is what of outbox.Config the file sets: the tenants' CRM
// deadlines, the replay targets' scopes and deadlines, the replay queue's
// workers and chunk (no target is built).
func (c Config) outboxOnly() outbox.Config {
	o := outbox.Config{ReplayWorkers: c.Replay.Workers, ReplayChunk: c.Replay.Chunk}
	for id, crm := range c.TenantCRMs() {
		if o.Destinations == nil {
			o.Destinations = map[string]outbox.Destination{}
		}
		o.Destinations[id] = outbox.Destination{Name: crm.Kind, Scope: crm.Scope, DeliveryDeadline: crm.DeliveryDeadline}
	}
	for name, t := range c.CRMTargets {
		if o.ReplayTargets == nil {
			o.ReplayTargets = map[string]outbox.ReplayTarget{}
		}
		o.ReplayTargets[name] = outbox.ReplayTarget{Scope: cmp.Or(t.Scope, ReplayTargetScope(name)), DeliveryDeadline: t.DeliveryDeadline}
	}
	return o
}

// outboxPaths puts the field errors of outbox.Config (as outboxOnly makes
// it) at the fields of Config they come from.
func outboxPaths(err error) error {
	var out []error
	for _, e := range fielderr.Flatten(err) {
		var fe *fielderr.Error
		if !errors.As(e, &fe) || len(fe.Path) == 0 {
			out = append(out, e)
			continue
		}
		var at []string
		switch rest := fe.Path[1:]; fe.Path[0] {
		case "Destinations":
			at = append([]string{"Pipeline", "Tenants", rest[0], "CRM"}, rest[1:]...)
		case "ReplayTargets":
			at = append([]string{"CRMTargets"}, rest...)
		case "ReplayWorkers":
			at = []string{"Replay", "Workers"}
		case "ReplayChunk":
			at = []string{"Replay", "Chunk"}
		default:
			at = fe.Path
		}
		out = append(out, &fielderr.Error{Path: at, Msg: fe.Msg, Refs: fe.Refs})
	}
	return errors.Join(out...)
}

// validateOwn reports the problems with what only the binary reads: the
// log, the status page, the capacity section, the CRMs' kinds, scopes and
// plain-http URLs.
func (c Config) validateOwn() error {
	var errs []error
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fielderr.In(fielderr.Errorf("Level", "%q is not one of debug, info, warn, error", c.Log.Level), "Log"))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" && c.Log.Format != "auto" {
		errs = append(errs, fielderr.In(fielderr.Errorf("Format", "%q is not text, json or auto", c.Log.Format), "Log"))
	}
	if _, err := status.ParseSecureCookies(c.StatusPage.SecureCookies); err != nil {
		errs = append(errs, fielderr.In(err, "StatusPage", "SecureCookies"))
	}
	if err := c.Capacity.startRate(); err != nil {
		errs = append(errs, err)
	}
	if g := c.Capacity.Gate; g.Size != 0 || len(g.Ceilings) > 0 {
		if g.TicketTTL < 0 {
			errs = append(errs, fmt.Errorf("capacity.gate.ticket_ttl: %s must be positive", g.TicketTTL))
		} else if err := c.Capacity.GateConfig().WithDefaults().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("capacity.gate: %w", err))
		}
	}
	if u := c.Capacity.Alerts.WebhookURL; u != "" {
		errs = append(errs, checkWebhookURL("capacity.alerts.webhook_url", u))
	}
	if c.Capacity.OrgLeaseShare < 0 || c.Capacity.OrgLeaseShare > 1 {
		errs = append(errs, fmt.Errorf("capacity.org_lease_share: %v must be above 0 and at most 1 (unset: 0.5)", c.Capacity.OrgLeaseShare))
	}
	if c.Capacity.CapsRefresh != 0 && c.Capacity.CapsRefresh < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("capacity.caps_refresh: %s must be at least 10ms (unset: 2s)", c.Capacity.CapsRefresh))
	}
	for key, d := range map[string]time.Duration{"capacity.redis_timeout": c.Capacity.RedisTimeout, "capacity.redis_admit_timeout": c.Capacity.RedisAdmitTimeout} {
		if d != 0 && (d < time.Millisecond || d > time.Minute) {
			errs = append(errs, fmt.Errorf("%s: %s must be 1ms–1m (unset: %s)", key, d, map[string]time.Duration{
				"capacity.redis_timeout": capacity.OpTimeoutDefault, "capacity.redis_admit_timeout": capacity.AdmitOpTimeoutDefault}[key]))
		}
	}
	if c.Capacity.MaxDialWaiters < 0 {
		errs = append(errs, fmt.Errorf("capacity.max_dial_waiters: %d must be positive (unset: 128)", c.Capacity.MaxDialWaiters))
	}
	if c.Capacity.OrgLimit < 0 {
		errs = append(errs, fmt.Errorf("capacity.org_limit: %d must be positive (0 or unset: %s, else 10)", c.Capacity.OrgLimit, EnvDefaultOrgLimit))
	}
	for _, id := range slices.Sorted(maps.Keys(c.Pipeline.Tenants)) {
		t := c.Pipeline.Tenants[id]
		at := []string{"Pipeline", "Tenants", fielderr.Key(id)}
		if k := t.CRM.Kind; k != "" && !slices.Contains(connector.Kinds(), k) {
			errs = append(errs, fielderr.In(fielderr.Errorf("Kind", "%q is not one of %v", k, connector.Kinds()), append(at, "CRM")...))
		}
		errs = append(errs, fielderr.In(plainHTTP(t.BaseURL, t.AllowInsecureHTTP), append(at, "BaseURL")...))
		if t.CRM.Kind != "" {
			errs = append(errs, fielderr.In(plainHTTP(t.CRM.BaseURL, t.CRM.AllowInsecureHTTP), append(at, "CRM", "BaseURL")...))
		}
	}
	crms := c.TenantCRMs()
	for _, name := range slices.Sorted(maps.Keys(c.CRMTargets)) {
		t := c.CRMTargets[name]
		at := []string{"CRMTargets", fielderr.Key(name)}
		if !slices.Contains(connector.Kinds(), t.Kind) {
			errs = append(errs, fielderr.In(fielderr.Errorf("Kind", "%q is not one of %v", t.Kind, connector.Kinds()), at...))
		}
		errs = append(errs, fielderr.In(plainHTTP(t.BaseURL, t.AllowInsecureHTTP), append(at, "BaseURL")...))
		scope := cmp.Or(t.Scope, ReplayTargetScope(name))
		for _, id := range slices.Sorted(maps.Keys(crms)) {
			if crms[id].Scope == scope {
				errs = append(errs, fielderr.In(fielderr.Errorf("Scope", "%q is tenant %s's CRM scope: a replay target needs a scope of its own, so that replay never waits on or takes production's deferral and window", scope, id), at...))
			}
		}
	}
	return errors.Join(errs...)
}

// plainHTTP refuses a base URL with scheme http to a host that is not
// loopback unless allowed. A URL that does not parse is left to the
// adapter, whose error says what is wrong with it.
func plainHTTP(raw string, allow bool) error {
	if raw == "" {
		return nil
	}
	base, err := vendorhttp.ParseBase(raw)
	if err != nil {
		return nil
	}
	if err := vendorhttp.CheckPlainHTTP(base, allow); err != nil {
		return fmt.Errorf("%s %w", base.Redacted(), err)
	}
	return nil
}

// readSecrets fills api_key and token from api_key_file and token_file,
// and notes the keys that hold a secret inline. Errors name the key.
func (c *Config) readSecrets() (inline []string, err error) {
	var errs []error
	read := func(key, fileKey string, value *string, file string) {
		switch {
		case file == "" && *value != "":
			inline = append(inline, key)
		case file != "" && *value != "":
			errs = append(errs, fmt.Errorf("%s and %s are both set: set one", key, fileKey))
		case file != "":
			b, err := os.ReadFile(file)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", fileKey, err)) // the error names the path
				return
			}
			*value = strings.TrimRight(string(b), "\r\n")
			if *value == "" {
				errs = append(errs, fmt.Errorf("%s: %s is empty", fileKey, file))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Pipeline.Tenants)) {
		t := c.Pipeline.Tenants[id]
		p := "pipeline.tenants." + id + "."
		read(p+"api_key", p+"api_key_file", &t.APIKey, t.APIKeyFile)
		read(p+"crm.token", p+"crm.token_file", &t.CRM.Token, t.CRM.TokenFile)
		c.Pipeline.Tenants[id] = t
	}
	read("capacity.alerts.webhook_token", "capacity.alerts.webhook_token_file", &c.Capacity.Alerts.WebhookToken, c.Capacity.Alerts.WebhookTokenFile)
	for _, name := range slices.Sorted(maps.Keys(c.CRMTargets)) {
		t := c.CRMTargets[name]
		p := "crm_targets." + name + "."
		read(p+"token", p+"token_file", &t.Token, t.TokenFile)
		c.CRMTargets[name] = t
	}
	return inline, errors.Join(errs...)
}

// LogWarnings logs what LoadConfig found worth a warning: a configuration
// file that holds secrets inline and that group or others can read. The
// warning names the file, its mode and the keys, never a secret.
func (c Config) LogWarnings(l *slog.Logger) {
	if e := c.exposed; e != nil {
		l.Warn("config file holds secrets inline and is readable by group or others: chmod 600 it, or use api_key_file / token_file",
			slog.String("file", e.file), slog.String("mode", fmt.Sprintf("%#o", e.mode.Perm())), slog.Any("keys", e.keys))
	}
}

// LoadConfig reads the YAML file at path (none if path is ""), applies the
// environment and the defaults, and validates the result. Unknown keys are
// errors, so a typo does not silently fall back to a default.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	var c Config
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("reading config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
		inline, err := c.readSecrets()
		if err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
		if len(inline) > 0 {
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o044 != 0 {
				c.exposed = &exposedSecrets{file: path, mode: fi.Mode(), keys: inline}
			}
		}
	}
	if v := getenv(EnvDatabaseURL); v != "" {
		c.DatabaseURL = v
	}
	if v := getenv(EnvRedisURL); v != "" {
		c.RedisURL = v
	}
	if v := strings.TrimSpace(getenv(EnvDefaultOrgLimit)); v != "" && c.Capacity.OrgLimit == 0 {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("environment %s: %q is not a whole number of calls of at least 1", EnvDefaultOrgLimit, v)
		}
		c.Capacity.OrgLimit = n
	}
	if err := checkAPIToken(getenv); err != nil {
		return Config{}, err
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		where := "configuration"
		if path != "" {
			where = "config " + path
		}
		return Config{}, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}

// NewLogger builds the process logger from the log section. Format auto
// (or empty) writes JSON unless w is a terminal. A logger made from it
// with With formats its attributes only when it first writes a record
// (internal/lazylog): a job's or a try's logger usually writes none.
func NewLogger(w io.Writer, c LogConfig) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(c.Level)))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" || (c.Format == "auto" || c.Format == "") && !terminal(w) {
		return slog.New(lazylog.New(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(lazylog.New(slog.NewTextHandler(w, opts)))
}

// terminal reports whether w is a terminal (a character device).
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startRate checks capacity.start_rate: each campaign rate 1–20, each
// organisation rate 1–1000 (the default 0–1000), names valid ids.
func (c CapacityConfig) startRate() error {
	var errs []error
	if n := c.StartRate.Default; n < 0 || n > live.StartRateMax {
		errs = append(errs, fmt.Errorf("capacity.start_rate.default: %d must be 1–%d (0 or unset: %d)", n, live.StartRateMax, live.StartRateDefault))
	}
	for _, org := range slices.Sorted(maps.Keys(c.StartRate.Campaigns)) {
		if capacity.CheckID("org", org) != nil {
			errs = append(errs, fmt.Errorf("capacity.start_rate.campaigns.%s: not an organisation id (1–128 of A-Z a-z 0-9 . _ -)", org))
		}
		for _, camp := range slices.Sorted(maps.Keys(c.StartRate.Campaigns[org])) {
			key := "capacity.start_rate.campaigns." + org + "." + camp
			if capacity.CheckID("campaign", camp) != nil {
				errs = append(errs, fmt.Errorf("%s: not a campaign id (1–128 of A-Z a-z 0-9 . _ -)", key))
			}
			if n := c.StartRate.Campaigns[org][camp]; n < 1 || n > live.StartRateMax {
				errs = append(errs, fmt.Errorf("%s: %d must be 1–%d starts per second", key, n, live.StartRateMax))
			}
		}
	}
	if n := c.StartRate.OrgDefault; n < 0 || n > live.OrgStartRateMax {
		errs = append(errs, fmt.Errorf("capacity.start_rate.org_default: %d must be 0–%d (0 or unset: no organisation rate)", n, live.OrgStartRateMax))
	}
	for _, org := range slices.Sorted(maps.Keys(c.StartRate.Orgs)) {
		key := "capacity.start_rate.orgs." + org
		if capacity.CheckID("org", org) != nil {
			errs = append(errs, fmt.Errorf("%s: not an organisation id (1–128 of A-Z a-z 0-9 . _ -)", key))
		}
		if n := c.StartRate.Orgs[org]; n < 1 || n > live.OrgStartRateMax {
			errs = append(errs, fmt.Errorf("%s: %d must be 1–%d starts per second", key, n, live.OrgStartRateMax))
		}
	}
	return errors.Join(errs...)
}

// RateLimiterConfig is capacity.start_rate for live.NewRateLimiter.
func (c CapacityConfig) RateLimiterConfig() live.RateLimiterConfig {
	return live.RateLimiterConfig{PerSecond: c.StartRate.Default, Campaigns: c.StartRate.Campaigns,
		OrgPerSecond: c.StartRate.OrgDefault, Orgs: c.StartRate.Orgs}
}

// GateConfig is capacity.gate for live.NewGate.
func (c CapacityConfig) GateConfig() live.GateConfig {
	return live.GateConfig{Name: c.Gate.Name, Size: c.Gate.Size, Ceilings: c.Gate.Ceilings, Timeout: c.Gate.Timeout,
		TicketTTL: c.Gate.TicketTTL}
}

// checkWebhookURL accepts an absolute http(s) URL; plain http only to a
// loopback host.
func checkWebhookURL(key, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s: want an absolute http(s) URL", key)
	}
	if u.Scheme == "http" && !Loopback(u.Host) && !Loopback(u.Host+":80") {
		return fmt.Errorf("%s: http:// only to a loopback host; use https://", key)
	}
	return nil
}

// checkAPIToken refuses an EnvAPIToken (an admin's credential) that is not
// at least 32 random bytes by the look of it (auth.CheckSecret).
func checkAPIToken(getenv func(string) string) error {
	v := getenv(EnvAPIToken)
	if v == "" {
		return nil
	}
	if err := auth.CheckSecret(v); err != nil {
		return fmt.Errorf("environment %s: %w; or unset it", EnvAPIToken, err)
	}
	return nil
}

// Loopback reports whether addr (host:port) names a loopback host.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
