package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// writeFile writes body to name in dir with mode and returns its path.
func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // the umask does not decide
		t.Fatal(err)
	}
	return p
}

// api_key_file and token_file are read, trailing line breaks removed.
func TestConfigSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := writeFile(t, dir, "stt.key", "sk-from-file\n", 0o600)
	tok := writeFile(t, dir, "crm.token", "tok-from-file\r\n", 0o600)
	staging := writeFile(t, dir, "staging.token", "staging-tok", 0o600)
	cfg := writeFile(t, dir, "c.yaml", `pipeline:
  tenants:
    acme:
      provider: generic-http
      base_url: "http://127.0.0.1:8090"
      api_key_file: `+key+`
      crm: {kind: webhook, base_url: "http://127.0.0.1:8091", token_file: `+tok+`}
crm_targets:
  staging: {kind: webhook, base_url: "https://crm.example", token_file: `+staging+`}
`, 0o644)
	c, err := config.LoadConfig(cfg, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	acme := c.Pipeline.Tenants["acme"]
	if acme.APIKey != "sk-from-file" || acme.CRM.Token != "tok-from-file" || c.CRMTargets["staging"].Token != "staging-tok" {
		t.Errorf("api key %q, crm token %q, staging token %q", acme.APIKey, acme.CRM.Token, c.CRMTargets["staging"].Token)
	}
	if p := c.PipelineConfig(); p.Tenants["acme"].APIKey != "sk-from-file" {
		t.Errorf("pipeline tenant key %q", p.Tenants["acme"].APIKey)
	}
	// Secrets only in files: a readable config file is no warning.
	var logs bytes.Buffer
	c.LogWarnings(slog.New(slog.NewTextHandler(&logs, nil)))
	if logs.Len() != 0 {
		t.Errorf("warning without inline secrets: %s", logs.String())
	}
}

// Both a secret and its file, or a file that cannot be read, are errors
// naming the key (and the path).
func TestConfigSecretFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := writeFile(t, dir, "stt.key", "sk-from-file\n", 0o600)
	empty := writeFile(t, dir, "empty.key", "\n", 0o600)
	missing := filepath.Join(dir, "no-such.key")
	for _, tt := range []struct {
		name, body string
		want       []string
	}{
		{"both key", "pipeline:\n  tenants:\n    acme: {provider: generic-http, api_key: k, api_key_file: " + key + "}\n",
			[]string{"pipeline.tenants.acme.api_key and pipeline.tenants.acme.api_key_file are both set"}},
		{"both token", "pipeline:\n  tenants:\n    acme: {provider: generic-http, crm: {kind: webhook, token: t, token_file: " + key + "}}\n",
			[]string{"pipeline.tenants.acme.crm.token and pipeline.tenants.acme.crm.token_file are both set"}},
		{"both target", "crm_targets:\n  staging: {kind: webhook, token: t, token_file: " + key + "}\n",
			[]string{"crm_targets.staging.token and crm_targets.staging.token_file are both set"}},
		{"missing key", "pipeline:\n  tenants:\n    acme: {provider: generic-http, api_key_file: " + missing + "}\n",
			[]string{"pipeline.tenants.acme.api_key_file", missing}},
		{"missing token", "crm_targets:\n  staging: {kind: webhook, token_file: " + missing + "}\n",
			[]string{"crm_targets.staging.token_file", missing}},
		{"empty key", "pipeline:\n  tenants:\n    acme: {provider: generic-http, api_key_file: " + empty + "}\n",
			[]string{"pipeline.tenants.acme.api_key_file", "is empty"}},
	} {
		_, err := config.LoadConfig(writeFile(t, dir, "c.yaml", tt.body, 0o600), envOf(nil))
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to name %q", tt.name, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "sk-from-file") {
			t.Errorf("%s: the error shows the key: %v", tt.name, err)
		}
	}
}

// A config file with an inline secret is a warning when group or others
// can read it; the warning names the file and mode, never the secret.
func TestConfigInlineSecretWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := `pipeline:
  tenants:
    acme:
      provider: generic-http
      base_url: "http://127.0.0.1:8090"
      api_key: sk-inline-secret
      crm: {kind: webhook, base_url: "http://127.0.0.1:8091", token: tok-inline-secret}
`
	for _, tt := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o640, true}, {0o604, true}, {0o600, false}, {0o400, false}} {
		p := writeFile(t, dir, "c.yaml", body, tt.mode)
		c, err := config.LoadConfig(p, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		c.LogWarnings(slog.New(slog.NewTextHandler(&logs, nil)))
		got := logs.String()
		if strings.Contains(got, "inline-secret") {
			t.Errorf("%#o: the warning shows a secret: %s", tt.mode, got)
		}
		if !tt.warn {
			if got != "" {
				t.Errorf("%#o: unexpected warning %s", tt.mode, got)
			}
			continue
		}
		for _, w := range []string{"level=WARN", "file=" + p, fmt.Sprintf("mode=%#o", tt.mode),
			"pipeline.tenants.acme.api_key", "pipeline.tenants.acme.crm.token"} {
			if !strings.Contains(got, w) {
				t.Errorf("%#o: warning %q does not contain %q", tt.mode, got, w)
			}
		}
	}
}

// http:// to a host that is not loopback is refused at load, naming the key,
// unless allow_insecure_http is set on that tenant or CRM.
func TestConfigPlainHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ name, body, want string }{
		{"stt", "pipeline:\n  tenants:\n    acme: {provider: generic-http, base_url: \"http://stt.internal:8090\", api_key: k}\n",
			"pipeline.tenants.acme.base_url"},
		{"crm", "pipeline:\n  tenants:\n    acme: {provider: generic-http, api_key: k, crm: {kind: webhook, base_url: \"http://crm.internal\", token: t}}\n",
			"pipeline.tenants.acme.crm.base_url"},
		{"target", "crm_targets:\n  staging: {kind: webhook, base_url: \"http://10.1.2.3:8091\", token: t}\n",
			"crm_targets.staging.base_url"},
		{"stt allowed", "pipeline:\n  tenants:\n    acme: {provider: generic-http, base_url: \"http://stt.internal:8090\", allow_insecure_http: true, api_key: k}\n", ""},
		{"crm allowed", "pipeline:\n  tenants:\n    acme: {provider: generic-http, api_key: k, crm: {kind: webhook, base_url: \"http://crm.internal\", allow_insecure_http: true, token: t}}\n", ""},
		{"target allowed", "crm_targets:\n  staging: {kind: webhook, base_url: \"http://10.1.2.3:8091\", allow_insecure_http: true, token: t}\n", ""},
		{"loopback", "pipeline:\n  tenants:\n    acme: {provider: generic-http, base_url: \"http://localhost:8090\", api_key: k, crm: {kind: webhook, base_url: \"http://[::1]:8091\", token: t}}\n", ""},
	} {
		_, err := config.LoadConfig(writeFile(t, dir, "c.yaml", tt.body, 0o600), envOf(nil))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "allow_insecure_http")):
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
}
