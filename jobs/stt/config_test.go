package stt

import (
	"context"
	"errors"
	"net/http"
	"strings"
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
		{KindGenericHTTP, Capabilities{Async: true, Reconcile: true}},
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
	g, err := NewGenericHTTP(Config{BaseURL: "http://stt.internal:8080/api/", APIKey: "k"})
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
