package stt

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestNew(t *testing.T) {
	t.Parallel()
	if got := Kinds(); strings.Join(got, ",") != "assemblyai,deepgram,generic-http,openai" {
		t.Errorf("Kinds() = %v", got)
	}
	for _, tt := range []struct {
		kind string
		caps Capabilities
	}{
		{KindGenericHTTP, Capabilities{Async: true, Reconcile: true, Batch: true}},
		{KindOpenAI, Capabilities{}},
		{KindDeepgram, Capabilities{}},
		{KindAssemblyAI, Capabilities{Async: true}},
	} {
		p, err := New(tt.kind, Config{BaseURL: "https://stt.example.com", APIKey: "k"})
		if err != nil {
			t.Fatalf("New(%q): %v", tt.kind, err)
		}
		if p.Name() != tt.kind || p.Capabilities() != tt.caps {
			t.Errorf("New(%q): Name %q Capabilities %+v", tt.kind, p.Name(), p.Capabilities())
		}
	}

	_, err := New("whisper.cpp", Config{APIKey: "k"})
	if err == nil || !strings.Contains(err.Error(), `"whisper.cpp"`) || !strings.Contains(err.Error(), "assemblyai, deepgram, generic-http, openai") {
		t.Errorf("unknown kind: %v", err)
	}
	// A failed constructor gives a nil interface, not a typed nil.
	if p, err := New(KindOpenAI, Config{}); err == nil || p != nil {
		t.Errorf("New without a key = %v, %v", p, err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kind  string
		cfg   Config
		field string // "" means valid
	}{
		{KindGenericHTTP, Config{APIKey: "k"}, "BaseURL is required"},
		{KindGenericHTTP, Config{BaseURL: "stt.example.com", APIKey: "k"}, "BaseURL"},
		{KindGenericHTTP, Config{BaseURL: "ftp://stt.example.com", APIKey: "k"}, "BaseURL"},
		{KindGenericHTTP, Config{BaseURL: "https://stt.example.com?x=1", APIKey: "k"}, "BaseURL"},
		{KindGenericHTTP, Config{BaseURL: "https://stt.example.com"}, "APIKey is required"},
		{KindGenericHTTP, Config{BaseURL: "https://stt.example.com", APIKey: "k\r\nX-Evil: 1"}, "APIKey"},
		{KindGenericHTTP, Config{BaseURL: "https://stt.example.com", APIKey: "k", MaxResponseBytes: -1}, "MaxResponseBytes"},
		{KindGenericHTTP, Config{BaseURL: "https://stt.example.com/prefix/", APIKey: "k", Timeout: -1}, ""},
		{KindOpenAI, Config{APIKey: "k"}, ""}, // the public endpoint by default
		{KindDeepgram, Config{APIKey: "k"}, ""},
		{KindAssemblyAI, Config{APIKey: "k"}, ""},
		{KindDeepgram, Config{}, "APIKey"},
	} {
		_, err := New(tt.kind, tt.cfg)
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s %+v: %v", tt.kind, tt.cfg, err)
		case tt.field != "" && (err == nil || !strings.Contains(err.Error(), tt.field)):
			t.Errorf("%s %+v: %v, want an error naming %s", tt.kind, tt.cfg, err, tt.field)
		}
	}
}

// TestConfigDefaults: the documented defaults are what the adapters use.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	o, err := NewOpenAI(Config{APIKey: "k"})
	mustNoErr(t, err)
	d, err := NewDeepgram(Config{APIKey: "k"})
	mustNoErr(t, err)
	a, err := NewAssemblyAI(Config{APIKey: "k"})
	mustNoErr(t, err)
	g, err := NewGenericHTTP(Config{BaseURL: "http://stt.internal:8080/api/", APIKey: "k", AllowInsecureHTTP: true})
	mustNoErr(t, err)
	for _, tt := range []struct {
		ep          *endpoint
		model       string
		base, wantM string
	}{
		{o.ep, o.model, OpenAIBaseURLDefault, OpenAIModelDefault},
		{d.ep, d.model, DeepgramBaseURLDefault, DeepgramModelDefault},
		{a.ep, a.model, AssemblyAIBaseURLDefault, AssemblyAIModelDefault},
		{g.ep, g.model, "http://stt.internal:8080/api", GenericHTTPModelDefault},
	} {
		if tt.ep.Base.String() != tt.base || tt.model != tt.wantM || tt.ep.Timeout != TimeoutDefault ||
			tt.ep.MaxBody != MaxResponseBytesDefault || tt.ep.Client == nil {
			t.Errorf("endpoint %+v model %q, want base %s model %q", tt.ep, tt.model, tt.base, tt.wantM)
		}
	}
	if got := g.ep.URL("/v1/transcriptions", nil); got != "http://stt.internal:8080/api/v1/transcriptions" {
		t.Errorf("path prefix kept: %s", got)
	}
}

// TestBaseURLPrefix: a BaseURL with a path prefix reaches the vendor.
func TestBaseURLPrefix(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "openai", "verbose_json.json")))
	cfg := v.config()
	cfg.BaseURL += "/openai/"
	o, err := NewOpenAI(cfg)
	mustNoErr(t, err)
	_, err = o.Submit(t.Context(), openAIRequest())
	mustNoErr(t, err)
	if p := v.only(t).Path; p != "/openai/v1/audio/transcriptions" {
		t.Errorf("path %s", p)
	}
}

// TestEveryAdapterSurvivesTheNetwork: resets, timeouts, garbage and
// unknown statuses are Responses for every adapter.
func TestEveryAdapterSurvivesTheNetwork(t *testing.T) {
	t.Parallel()
	requests := map[string]Request{
		KindGenericHTTP: genericRequest(),
		KindOpenAI:      openAIRequest(),
		KindDeepgram:    deepgramURLRequest(),
		KindAssemblyAI:  assemblyAIURLRequest(),
	}
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cases := []struct {
				name    string
				handler func(v *vendor) http.HandlerFunc
				outcome Outcome
				class   string
				status  int
			}{
				{"reset", func(*vendor) http.HandlerFunc { return resetConnection(t) }, OutcomeTransient, ClassNetwork, 0},
				{"reset mid-body", func(*vendor) http.HandlerFunc { return resetMidBody(t) }, OutcomeTransient, ClassNetwork, 200},
				{"timeout", func(v *vendor) http.HandlerFunc { return v.block }, OutcomeTransient, ClassTimeout, 0},
				{"garbage", func(*vendor) http.HandlerFunc {
					return answer(200, []byte("\x00\xff{{{"), "Content-Type", "application/octet-stream")
				}, OutcomeTransient, ClassBadResponse, 200},
				{"JSON array", func(*vendor) http.HandlerFunc { return answer(200, []byte(`[1, 2, 3]`)) }, OutcomeTransient, ClassBadResponse, 200},
				{"418", func(*vendor) http.HandlerFunc { return answer(418, []byte(`{}`)) }, OutcomeTransient, ClassUnexpectedStatus, 418},
				{"599", func(*vendor) http.HandlerFunc { return answer(599, nil) }, OutcomeTransient, ClassServerError, 599},
				{"408", func(*vendor) http.HandlerFunc { return answer(408, nil) }, OutcomeTransient, ClassTimeout, 408},
			}
			for _, c := range cases {
				v := newVendor(t)
				v.handlers = []http.HandlerFunc{c.handler(v)}
				cfg := v.config()
				cfg.Timeout = shortTimeout
				p, err := New(kind, cfg)
				mustNoErr(t, err)
				got, err := p.Submit(t.Context(), requests[kind])
				if err != nil {
					t.Errorf("%s: error %v", c.name, err)
					continue
				}
				if got.Outcome != c.outcome || got.Class != c.class || got.HTTPStatus != c.status {
					t.Errorf("%s: got %q %q %d (%q), want %q %q %d", c.name, got.Outcome, got.Class, got.HTTPStatus, got.Message, c.outcome, c.class, c.status)
				}
				if got.Transcript != nil {
					t.Errorf("%s: a transcript from a failure", c.name)
				}
			}
		})
	}
}

// TestPollAndReconcileSentinels: what each adapter says it cannot do.
func TestPollAndReconcileSentinels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, kind := range Kinds() {
		p, err := New(kind, Config{BaseURL: "http://127.0.0.1:1", APIKey: "k"})
		mustNoErr(t, err)
		caps := p.Capabilities()
		if _, err := p.Poll(ctx, ""); caps.Async != !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: Async %v but Poll says %v", kind, caps.Async, err)
		}
		if _, err := p.Reconcile(ctx, ""); caps.Reconcile != !errors.Is(err, ErrCannotReconcile) {
			t.Errorf("%s: Reconcile %v but Reconcile says %v", kind, caps.Reconcile, err)
		}
	}
}

// TestRedirectsAreNotFollowed: a vendor answering 307 to another server
// gets a permanent unexpected_redirect on every call of every adapter, with
// the default client and with the caller's; the other server receives
// nothing, and the caller's client is not changed.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := newRawServer(t, func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		answer(200, []byte(`{}`))(w, r)
	})
	requests := map[string]Request{
		KindGenericHTTP: genericRequest(),
		KindOpenAI:      openAIRequest(),
		KindDeepgram:    deepgramURLRequest(),
		KindAssemblyAI:  assemblyAIURLRequest(),
	}
	for _, kind := range Kinds() {
		for _, own := range []bool{false, true} {
			v := newVendor(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
			})
			cfg := v.config()
			if !own {
				cfg.HTTPClient = nil
			}
			p, err := New(kind, cfg)
			mustNoErr(t, err)
			calls := map[string]func() (Response, error){
				"submit": func() (Response, error) { return p.Submit(t.Context(), requests[kind]) },
			}
			if p.Capabilities().Async {
				calls["poll"] = func() (Response, error) { return p.Poll(t.Context(), "tr_2") }
			}
			if p.Capabilities().Reconcile {
				calls["reconcile"] = func() (Response, error) { return p.Reconcile(t.Context(), "t1:call-42:9f86d0") }
			}
			for name, call := range calls {
				got, err := call()
				if err != nil {
					t.Errorf("%s %s (own client %v): %v", kind, name, own, err)
					continue
				}
				if got.Outcome != OutcomePermanent || got.Class != ClassUnexpectedRedirect || got.HTTPStatus != http.StatusTemporaryRedirect {
					t.Errorf("%s %s (own client %v): got %q %q %d (%q), want permanent unexpected_redirect 307",
						kind, name, own, got.Outcome, got.Class, got.HTTPStatus, got.Message)
				}
			}
			if n := len(v.requests()); n != len(calls) {
				t.Errorf("%s (own client %v): vendor received %d requests, want %d", kind, own, n, len(calls))
			}
			if own && cfg.HTTPClient.CheckRedirect != nil {
				t.Errorf("%s: the caller's client was changed", kind)
			}
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect target received %d requests", n)
	}
}

// TestPlainHTTP: http:// is taken for loopback hosts, and for others only
// with AllowInsecureHTTP; the error names the field and the opt-in.
func TestPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		for _, base := range []string{"http://127.0.0.1:8090", "http://[::1]:8090", "http://localhost:8090/api"} {
			if _, err := New(kind, Config{BaseURL: base, APIKey: "k"}); err != nil {
				t.Errorf("%s %s: %v", kind, base, err)
			}
		}
		_, err := New(kind, Config{BaseURL: "http://stt.internal:8080", APIKey: "k"})
		if err == nil || !strings.Contains(err.Error(), "BaseURL") || !strings.Contains(err.Error(), "allow_insecure_http") {
			t.Errorf("%s http to stt.internal: %v, want an error naming BaseURL", kind, err)
		}
		if _, err := New(kind, Config{BaseURL: "http://stt.internal:8080", APIKey: "k", AllowInsecureHTTP: true}); err != nil {
			t.Errorf("%s allowed: %v", kind, err)
		}
	}
}
