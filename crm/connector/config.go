package connector

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // Config.TimeZone must load on hosts without a zoneinfo database

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// Target kinds, as Config.Kind names them and Target.Name returns them.
const (
	KindWebhook    = "webhook"
	KindSalesforce = "salesforce"
	KindHubSpot    = "hubspot"
)

// Defaults.
const (
	// TimeoutDefault is Config.Timeout when left zero.
	TimeoutDefault = 30 * time.Second
	// HubSpotBaseURLDefault is Config.BaseURL for hubspot when left empty.
	HubSpotBaseURLDefault = "https://api.hubapi.com"
	// SalesforceAPIVersionDefault is Config.APIVersion when left empty: an
	// API version that answers an upsert of an existing record with 200
	// and "created": false (46.0 and later).
	SalesforceAPIVersionDefault = "v59.0"
	// SalesforceSObjectDefault is Config.SObject when left empty.
	SalesforceSObjectDefault = "Task"
	// SalesforceExternalIDFieldDefault is Config.ExternalIDField when left
	// empty: a custom text field on SObject marked External ID and Unique.
	SalesforceExternalIDFieldDefault = "Callscribe_Key__c"
	// HubSpotTimeZoneDefault is Config.TimeZone when left empty. HubSpot
	// resets the daily limit at midnight in the account's time zone
	// setting; Eastern Time is where HubSpot has said it resets and what a
	// US account usually has. Set the account's own zone.
	HubSpotTimeZoneDefault = "America/New_York"
	// HubSpotIDPropertyDefault is Config.IDProperty when left empty: a
	// custom property with unique values on notes and on tasks.
	HubSpotIDPropertyDefault = "callscribe_key"
)

// MessageMaxBytes is the longest Result.Message.
const MessageMaxBytes = 200

// MaxResponseBytes caps how much of a response body is read. A success
// body over it is a transient ClassResponseTooLarge; an error body is cut.
const MaxResponseBytes = 1 << 20

// Config configures one target. The zero value of every field but Kind,
// Token and (except for hubspot) BaseURL means its default. The yaml keys
// are those of callscribe's configuration file.
type Config struct {
	// Kind is "webhook", "salesforce" or "hubspot". Required.
	Kind string `yaml:"kind"`
	// BaseURL is the API root: scheme, host and an optional path prefix.
	// webhook: where crm-webhook/v1 is served (the target appends
	// /v1/action-sets); required. salesforce: the org's instance URL
	// ("https://MyDomainName.my.salesforce.com"); required. hubspot:
	// default HubSpotBaseURLDefault. Plain http is refused unless the host
	// is loopback (127.0.0.0/8, ::1, "localhost") or AllowInsecureHTTP is
	// set.
	BaseURL string `yaml:"base_url"`
	// AllowInsecureHTTP lets BaseURL use http:// to a host that is not
	// loopback: the token then crosses the network in the clear. Default
	// false.
	AllowInsecureHTTP bool `yaml:"allow_insecure_http"`
	// Token is the Bearer token of every request: the webhook's token, a
	// Salesforce OAuth access token, a HubSpot private app token. Required.
	// It never appears in a Result, an error, String or LogValue.
	Token string `yaml:"token"`
	// HTTPClient sends the requests. Default (nil): a client on
	// vendorhttp.Transport (http.DefaultTransport's settings, keeping an
	// idle connection per delivery once in flight for the next ones; the
	// same transport for a client without a Transport). The target uses a copy that never follows
	// redirects (a redirect is ClassUnexpectedRedirect): a redirected POST
	// would lose its body or carry the token elsewhere.
	HTTPClient *http.Client `yaml:"-"`
	// Timeout bounds each HTTP exchange, from sending the request to
	// reading the whole answer (salesforce makes one exchange per action,
	// hubspot up to two). Default TimeoutDefault (30s); negative means no
	// target timeout (the caller's context and HTTPClient.Timeout still
	// apply).
	Timeout time.Duration `yaml:"-"`

	// APIVersion is the Salesforce REST API version, "vNN.N". Default
	// SalesforceAPIVersionDefault.
	APIVersion string `yaml:"api_version"`
	// SObject is the Salesforce object each action becomes. Default
	// SalesforceSObjectDefault ("Task"); another object must have the
	// Task fields the mapping writes (Subject, Description, ActivityDate).
	SObject string `yaml:"sobject"`
	// ExternalIDField is the Salesforce external ID field the upsert goes
	// by. Default SalesforceExternalIDFieldDefault.
	ExternalIDField string `yaml:"external_id_field"`

	// TimeZone is the HubSpot account's time zone (IANA name): the daily
	// limit resets at its midnight, and dates (due, next call) become
	// HubSpot timestamps at its midnight. Default HubSpotTimeZoneDefault.
	TimeZone string `yaml:"time_zone"`
	// IDProperty is the HubSpot property with unique values that the batch
	// upsert goes by, on notes and tasks alike. Default
	// HubSpotIDPropertyDefault.
	IDProperty string `yaml:"id_property"`

	// Clock tells the time, for HubSpot's daily reset. Default (nil):
	// clock.System.
	Clock clock.Clock `yaml:"-"`

	// Production marks a target that writes to a production CRM. Targets
	// do not read it: replay refuses to drive one.
	Production bool `yaml:"production"`
}

// WithDefaults returns c with every field its kind gives a default and
// that is left zero set to it: BaseURL (hubspot), Timeout, APIVersion,
// SObject and ExternalIDField (salesforce), TimeZone and IDProperty
// (hubspot), Clock. A negative Timeout is kept (no target timeout).
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.Clock = cmp.Or[clock.Clock](c.Clock, clock.System{})
	switch c.Kind {
	case KindSalesforce:
		c.APIVersion = cmp.Or(c.APIVersion, SalesforceAPIVersionDefault)
		c.SObject = cmp.Or(c.SObject, SalesforceSObjectDefault)
		c.ExternalIDField = cmp.Or(c.ExternalIDField, SalesforceExternalIDFieldDefault)
	case KindHubSpot:
		c.BaseURL = cmp.Or(c.BaseURL, HubSpotBaseURLDefault)
		c.TimeZone = cmp.Or(c.TimeZone, HubSpotTimeZoneDefault)
		c.IDProperty = cmp.Or(c.IDProperty, HubSpotIDPropertyDefault)
	}
	return c
}

// String describes c without its token, for logs and errors.
func (c Config) String() string {
	return fmt.Sprintf("connector.Config{Kind: %q, BaseURL: %q, Token: %s, Production: %t}",
		c.Kind, scrubURLs(c.BaseURL), tokenMark(c.Token), c.Production)
}

// GoString is String, so that %#v does not print the token either.
func (c Config) GoString() string { return c.String() }

// LogValue describes c without its token, for slog.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("kind", c.Kind),
		slog.String("base_url", scrubURLs(c.BaseURL)),
		slog.String("token", tokenMark(c.Token)),
		slog.Bool("production", c.Production),
	)
}

// tokenMark says whether a token is set, never what it is.
func tokenMark(t string) string {
	if t == "" {
		return "unset"
	}
	return redacted
}

var (
	apiVersionPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+$`)
	apiNamePattern    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
)

// endpointFor validates the fields every target shares (of c, defaults
// applied) and returns the endpoint its requests go through. Errors name
// the field.
func (c Config) endpointFor(kind string) (*endpoint, error) {
	prefix := "crm target: " + kind + ": "
	if c.BaseURL == "" {
		return nil, fmt.Errorf("%sConfig.BaseURL is required", prefix)
	}
	base, err := vendorhttp.ParseBase(c.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("%sConfig.BaseURL %q %w", prefix, scrubURLs(c.BaseURL), err)
	}
	if err := vendorhttp.CheckPlainHTTP(base, c.AllowInsecureHTTP); err != nil {
		return nil, fmt.Errorf("%sConfig.BaseURL %q %w", prefix, scrubURLs(c.BaseURL), err)
	}
	if c.Token == "" {
		return nil, fmt.Errorf("%sConfig.Token is required", prefix)
	}
	if strings.ContainsAny(c.Token, "\r\n") {
		return nil, fmt.Errorf("%sConfig.Token must not contain a line break", prefix)
	}
	return &endpoint{
		Endpoint: vendorhttp.Endpoint{
			Client:    vendorhttp.NoRedirects(c.HTTPClient),
			Base:      base,
			Timeout:   c.Timeout,
			MaxBody:   MaxResponseBytes,
			UserAgent: userAgent,
		},
		token: c.Token,
		now:   c.Clock.Now,
		scrub: newScrubber(c.Token),
	}, nil
}

// constructors is the registry New reads.
var constructors = map[string]func(Config) (Target, error){
	KindWebhook:    newWebhook,
	KindSalesforce: newSalesforce,
	KindHubSpot:    newHubSpot,
}

// Kinds returns the kinds New knows, sorted.
func Kinds() []string {
	kinds := make([]string, 0, len(constructors))
	for k := range constructors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// New builds the target cfg.Kind names: "webhook", "salesforce" or
// "hubspot". An unknown kind is an error that lists the known ones; other
// errors name the Config field at fault.
func New(cfg Config) (Target, error) {
	ctor, ok := constructors[cfg.Kind]
	if !ok {
		return nil, fmt.Errorf("crm target: unknown Config.Kind %q (known: %s)", cfg.Kind, strings.Join(Kinds(), ", "))
	}
	return ctor(cfg.WithDefaults())
}
