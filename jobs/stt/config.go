package stt

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// Provider kinds, as New takes them and Provider.Name returns them.
const (
	KindGenericHTTP = "generic-http"
	KindOpenAI      = "openai"
	KindDeepgram    = "deepgram"
	KindAssemblyAI  = "assemblyai"
)

// Defaults.
const (
	// TimeoutDefault is Config.Timeout when left zero.
	TimeoutDefault = 5 * time.Minute
	// MaxResponseBytesDefault is Config.MaxResponseBytes when left zero.
	MaxResponseBytesDefault = 4 << 20

	// OpenAIBaseURLDefault is Config.BaseURL for openai when left empty.
	OpenAIBaseURLDefault = "https://api.openai.com"
	// DeepgramBaseURLDefault is Config.BaseURL for deepgram when left empty.
	DeepgramBaseURLDefault = "https://api.deepgram.com"
	// AssemblyAIBaseURLDefault is Config.BaseURL for assemblyai when left
	// empty.
	AssemblyAIBaseURLDefault = "https://api.assemblyai.com"

	// GenericHTTPModelDefault is Config.Model for generic-http when left
	// empty.
	GenericHTTPModelDefault = "general"
	// OpenAIModelDefault is Config.Model for openai when left empty: the
	// model that offers verbose_json with segments.
	OpenAIModelDefault = "whisper-1"
	// DeepgramModelDefault is Config.Model for deepgram when left empty.
	DeepgramModelDefault = "nova-2"
	// AssemblyAIModelDefault is Config.Model for assemblyai when left
	// empty: no speech_model is sent and AssemblyAI picks its default.
	AssemblyAIModelDefault = ""
)

// MessageMaxBytes is the longest Response.Message.
const MessageMaxBytes = 200

// Config configures one adapter. The zero value of every field but APIKey
// (and BaseURL for generic-http) means its default.
type Config struct {
	// BaseURL is the API root: scheme, host and an optional path prefix,
	// without the API version ("https://api.openai.com", or
	// "https://api.groq.com/openai" for an OpenAI-compatible vendor); the
	// adapter appends /v1/..., /v2/.... Default: OpenAIBaseURLDefault,
	// DeepgramBaseURLDefault, AssemblyAIBaseURLDefault; generic-http has
	// no default and requires it. Plain http is refused unless the host is
	// loopback (127.0.0.0/8, ::1, "localhost") or AllowInsecureHTTP is set.
	BaseURL string
	// AllowInsecureHTTP lets BaseURL use http:// to a host that is not
	// loopback: the API key and the audio then cross the network in the
	// clear. Default false.
	AllowInsecureHTTP bool
	// APIKey authenticates every request. Required.
	APIKey string
	// Model is the model used when Request.Model is empty. Default:
	// GenericHTTPModelDefault, OpenAIModelDefault, DeepgramModelDefault,
	// AssemblyAIModelDefault (none: the vendor's default).
	Model string
	// HTTPClient sends the requests. Default (nil): a client on
	// vendorhttp.Transport (http.DefaultTransport's settings, keeping an
	// idle connection per request once in flight for the next ones; the
	// same transport for a client without a Transport) with no client
	// timeout. A client's own Timeout
	// applies on top of Timeout. The adapter uses a copy that never
	// follows redirects (a 3xx is a permanent ClassUnexpectedRedirect): a
	// redirected POST would lose its body or carry the key elsewhere.
	HTTPClient *http.Client
	// Timeout bounds each HTTP exchange, from sending the request to
	// reading the whole response body (an assemblyai Submit of a local file
	// makes two exchanges). Default TimeoutDefault (5m); negative means no
	// adapter timeout (the caller's context and HTTPClient.Timeout still
	// apply).
	Timeout time.Duration
	// MaxResponseBytes caps how much of a response body is read; a longer
	// body is a transient ClassResponseTooLarge. Default
	// MaxResponseBytesDefault (4 MiB); negative is refused.
	MaxResponseBytes int64
}

// ProviderConfig is the configuration New hands to the adapter it builds.
type ProviderConfig = Config

// adapterDefaults are the defaults that differ between adapters.
type adapterDefaults struct {
	kind    string
	baseURL string // "" means required
	model   string
}

// resolve applies the adapter's defaults, validates c and returns the
// endpoint every request goes through. Errors name the field.
func (c Config) resolve(d adapterDefaults) (*endpoint, string, error) {
	if c.BaseURL == "" {
		c.BaseURL = d.baseURL
	}
	if c.Model == "" {
		c.Model = d.model
	}
	if c.Timeout == 0 {
		c.Timeout = TimeoutDefault
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = MaxResponseBytesDefault
	}

	prefix := "stt: " + d.kind + ": "
	if c.BaseURL == "" {
		return nil, "", fmt.Errorf("%sBaseURL is required", prefix)
	}
	base, err := vendorhttp.ParseBase(c.BaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("%sBaseURL %q %w", prefix, scrubURLs(c.BaseURL), err)
	}
	if err := vendorhttp.CheckPlainHTTP(base, c.AllowInsecureHTTP); err != nil {
		return nil, "", fmt.Errorf("%sBaseURL %q %w", prefix, scrubURLs(c.BaseURL), err)
	}
	if c.APIKey == "" {
		return nil, "", fmt.Errorf("%sAPIKey is required", prefix)
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		return nil, "", fmt.Errorf("%sAPIKey must not contain a line break", prefix)
	}
	if c.MaxResponseBytes < 0 {
		return nil, "", fmt.Errorf("%sMaxResponseBytes (%d) must not be negative", prefix, c.MaxResponseBytes)
	}
	return &endpoint{
		Endpoint: vendorhttp.Endpoint{
			Client:    vendorhttp.NoRedirects(c.HTTPClient),
			Base:      base,
			Timeout:   c.Timeout,
			MaxBody:   c.MaxResponseBytes,
			UserAgent: userAgent,
		},
		apiKey: c.APIKey,
	}, c.Model, nil
}

// constructors is the registry New reads.
var constructors = map[string]func(Config) (Provider, error){
	KindGenericHTTP: func(c Config) (Provider, error) { return asProvider(NewGenericHTTP(c)) },
	KindOpenAI:      func(c Config) (Provider, error) { return asProvider(NewOpenAI(c)) },
	KindDeepgram:    func(c Config) (Provider, error) { return asProvider(NewDeepgram(c)) },
	KindAssemblyAI:  func(c Config) (Provider, error) { return asProvider(NewAssemblyAI(c)) },
}

// asProvider keeps a failed constructor's nil pointer out of the interface.
func asProvider[P Provider](p P, err error) (Provider, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
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

// New builds the provider of the given kind: "generic-http", "openai",
// "deepgram" or "assemblyai". An unknown kind is an error that lists the
// known ones.
func New(kind string, cfg ProviderConfig) (Provider, error) {
	ctor, ok := constructors[kind]
	if !ok {
		return nil, fmt.Errorf("stt: unknown provider kind %q (known: %s)", kind, strings.Join(Kinds(), ", "))
	}
	return ctor(cfg)
}
