package connector

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNewKinds(t *testing.T) {
	t.Parallel()
	if got := strings.Join(Kinds(), ","); got != "hubspot,salesforce,webhook" {
		t.Errorf("Kinds() = %s", got)
	}
	_, err := New(Config{Kind: "pipedrive", BaseURL: "https://x.example", Token: testToken})
	if err == nil || !strings.Contains(err.Error(), `"pipedrive"`) || !strings.Contains(err.Error(), "hubspot, salesforce, webhook") {
		t.Errorf("unknown kind: %v", err)
	}
	for _, kind := range Kinds() {
		tg, err := New(Config{Kind: kind, BaseURL: "https://crm.example.com", Token: testToken})
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		if tg.Name() != kind {
			t.Errorf("Name() = %q, want %q", tg.Name(), kind)
		}
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg   Config
		field string
	}{
		{Config{Kind: KindWebhook, Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindSalesforce, Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindWebhook, BaseURL: "ftp://crm.example.com", Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindWebhook, BaseURL: "/relative", Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindWebhook, BaseURL: "https://crm.example.com#frag", Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindWebhook, BaseURL: "https://crm.example.com"}, "Config.Token"},
		{Config{Kind: KindWebhook, BaseURL: "http://crm.example.com", Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindSalesforce, BaseURL: "http://10.0.0.7:8080", Token: testToken}, "allow_insecure_http"},
		{Config{Kind: KindHubSpot, BaseURL: "http://crm.internal", Token: testToken}, "Config.BaseURL"},
		{Config{Kind: KindHubSpot}, "Config.Token"},
		{Config{Kind: ""}, "Config.Kind"},
	} {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%v) = %v, want an error naming %s", tt.cfg, err, tt.field)
		}
	}
}

// TestConfigPlainHTTP: http:// is taken for loopback hosts, and for others
// only with AllowInsecureHTTP.
func TestConfigPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		for _, base := range []string{"http://127.0.0.1:8091", "http://[::1]:8091", "http://localhost:8091"} {
			if _, err := New(Config{Kind: kind, BaseURL: base, Token: testToken}); err != nil {
				t.Errorf("%s %s: %v", kind, base, err)
			}
		}
		_, err := New(Config{Kind: kind, BaseURL: "http://crm.internal:8091", Token: testToken, AllowInsecureHTTP: true})
		if err != nil {
			t.Errorf("%s allowed: %v", kind, err)
		}
	}
}

// TestConfigHTTPClient: the caller's client is used (its transport sees
// the requests) but not changed, and redirects are never followed.
func TestConfigHTTPClient(t *testing.T) {
	t.Parallel()
	var followed bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed = true
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	client := srv.Client()
	tg, err := New(Config{Kind: KindWebhook, BaseURL: srv.URL, Token: testToken, HTTPClient: client, Timeout: -1})
	mustNoErr(t, err)
	got, err := tg.Deliver(t.Context(), delivery())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeDead, ClassUnexpectedRedirect, 307)
	if followed || client.CheckRedirect != nil {
		t.Errorf("followed %v, caller's CheckRedirect changed %v", followed, client.CheckRedirect != nil)
	}
}

// TestConfigTimeoutDefault: a zero Timeout is TimeoutDefault, a negative
// one none.
func TestConfigTimeoutDefault(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]time.Duration{0: TimeoutDefault, -1: -1, time.Second: time.Second} {
		ep, err := Config{Kind: KindWebhook, BaseURL: "https://crm.example.com", Token: testToken, Timeout: in}.WithDefaults().endpointFor(KindWebhook)
		mustNoErr(t, err)
		if ep.Timeout != want {
			t.Errorf("Timeout %v → %v, want %v", in, ep.Timeout, want)
		}
	}
}
