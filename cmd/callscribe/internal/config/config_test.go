package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	body := "database_url: postgres://file/db\nretry_after:\n  max_delay: 30m\nledger:\n  retention: 720h\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.LoadConfig(p, envOf(map[string]string{config.EnvDatabaseURL: "postgres://env/db"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != "postgres://env/db" {
		t.Errorf("environment must win over the file: %q", c.DatabaseURL)
	}
	if c.RetryAfter.MaxDelay != 30*time.Minute || c.Ledger.Retention != 720*time.Hour {
		t.Errorf("file values lost: %+v", c)
	}
	if c.RetryAfter.BaseBackoff != retryafter.BaseBackoffDefault || c.Log.Level != config.LogLevelDefault || c.RedisURL != "" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

// placeholders name the keys of the configuration's maps as README.md
// writes them, by the map's key (the keys of the maps above it written
// with their own placeholders).
var placeholders = map[string]string{
	"pipeline.tenants":                    "<id>",
	"crm_targets":                         "<name>",
	"capacity.limits":                     "<provider>/<kind>",
	"capacity.orgs":                       "<org>",
	"capacity.orgs.<org>.campaigns":       "<campaign>",
	"capacity.agents":                     "<agent>",
	"capacity.start_rate.campaigns":       "<org>",
	"capacity.start_rate.campaigns.<org>": "<campaign>",
	"capacity.start_rate.orgs":            "<org>",
	"capacity.gate.ceilings":              "<pool>",
}

// configKeys walks t by its yaml tags and returns every key a file may
// set, maps' keys written as placeholders names them.
func configKeys(t *testing.T, typ reflect.Type, prefix string) []string {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ.Kind() == reflect.Map:
		ph, ok := placeholders[prefix]
		if !ok {
			t.Errorf("%s is a map: name its keys' placeholder in placeholders", prefix)
			return []string{prefix}
		}
		return configKeys(t, typ.Elem(), prefix+"."+ph)
	case typ.Kind() != reflect.Struct:
		return []string{prefix}
	}
	var keys []string
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case opts == "inline" || (f.Anonymous && name == ""):
			keys = append(keys, configKeys(t, f.Type, prefix)...)
		case name == "":
			t.Errorf("%s: field %s has no yaml tag", typ, f.Name)
		case prefix == "":
			keys = append(keys, configKeys(t, f.Type, name)...)
		default:
			keys = append(keys, configKeys(t, f.Type, prefix+"."+name)...)
		}
	}
	return keys
}

// documentedKeys are the keys the first column of README.md's
// configuration table names: "`a.b` / `c`" names a.b and a.c.
func documentedKeys(readme string) map[string]bool {
	keys := map[string]bool{}
	for line := range strings.Lines(readme) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		first := ""
		for part := range strings.SplitSeq(cell, " / ") {
			k := strings.Trim(strings.TrimSpace(part), "`")
			if first == "" {
				first = k
			} else if !strings.Contains(k, ".") {
				if i := strings.LastIndex(first, "."); i >= 0 {
					k = first[:i+1] + k
				}
			}
			keys[k] = true
		}
	}
	return keys
}

// Every configuration key is documented in README.md's configuration
// table, with its default: a key, or the map entry holding it
// (capacity.orgs.<org> documents capacity.orgs.<org>.limit), or the map
// itself (capacity.gate.ceilings). The keys are found by reflection over
// Config, so a new key cannot go undocumented.
func TestConfigDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedKeys(string(readme))
	keys := configKeys(t, reflect.TypeFor[config.Config](), "")
	if len(keys) < 50 {
		t.Fatalf("only %d keys found by reflection: %v", len(keys), keys)
	}
	for _, key := range keys {
		parts := strings.Split(key, ".")
		ok := false
		for i := len(parts); i > 0 && !ok; i-- {
			entry := strings.HasPrefix(parts[i-1], "<") || (i < len(parts) && strings.HasPrefix(parts[i], "<"))
			ok = documented[strings.Join(parts[:i], ".")] && (i == len(parts) || entry)
		}
		if !ok {
			t.Errorf("README.md does not document `%s`", key)
		}
	}
	for _, env := range []string{config.EnvDatabaseURL, config.EnvRedisURL, config.EnvDefaultOrgLimit} {
		if !strings.Contains(string(readme), "`"+env+"`") {
			t.Errorf("README.md does not document `%s`", env)
		}
	}
}

// status_page.secure_cookies: auto by default; auto, always or never, else
// an error naming the key.
func TestStatusPageSecureCookiesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := config.LoadConfig("", envOf(nil))
	if err != nil || c.StatusPage.SecureCookies != "auto" {
		t.Fatalf("default: %q, %v; want auto", c.StatusPage.SecureCookies, err)
	}
	for _, v := range []string{"auto", "always", "never"} {
		path := writeFile(t, dir, v+".yaml", "status_page:\n  secure_cookies: "+v+"\n", 0o600)
		if c, err := config.LoadConfig(path, envOf(nil)); err != nil || c.StatusPage.SecureCookies != v {
			t.Errorf("%s: %q, %v", v, c.StatusPage.SecureCookies, err)
		}
	}
	path := writeFile(t, dir, "bad.yaml", "status_page:\n  secure_cookies: sometimes\n", 0o600)
	if _, err := config.LoadConfig(path, envOf(nil)); err == nil || !strings.Contains(err.Error(), "status_page.secure_cookies") {
		t.Fatalf("secure_cookies: sometimes: %v, want an error naming the key", err)
	}
}

// One bad value is one error line, naming its key in the file (the
// packages' Validate name Go fields; the binary names them by their yaml
// tags), and the keys its message refers to.
func TestOneBadValueOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tenant := "pipeline:\n  tenants:\n    acme: {provider: generic-http, api_key: k, %s}\n"
	for _, tt := range []struct{ body, want string }{
		{"ledger: {retention: -1h}\n", "ledger.retention: -1h0m0s must be positive"},
		{"ledger: {group_commit: {max_items: -1}}\n", "ledger.group_commit.max_items: -1 must be between 1 and 1000"},
		{"ledger: {group_commit: {linger: 2s}}\n", "ledger.group_commit.linger: 2s must be between 0 and 1s"},
		{"retry_after: {max_backoff: -1s}\n", "retry_after.max_backoff: -1s must not be negative"},
		{"retry_after: {base_backoff: 10m, max_backoff: 1m}\n", "retry_after.max_backoff: 1m0s must be >= retry_after.base_backoff (10m0s)"},
		{"pipeline: {step_timeout: 10m, rescue_after: 5m}\n", "pipeline.rescue_after: 5m0s must exceed pipeline.step_timeout 10m0s"},
		{"pipeline: {batch: {max_wait: -1s}}\n", "pipeline.batch.max_wait: -1s must not be negative"},
		{strings.Replace(tenant, "%s", "min_confidence: 2", 1), "pipeline.tenants.acme.min_confidence: 2 is not within 0..1"},
		{strings.Replace(tenant, "%s", "crm: {kind: webhook, delivery_deadline: -1h}", 1), "pipeline.tenants.acme.crm.delivery_deadline: -1h0m0s must be positive"},
		{"replay: {chunk: -1}\n", "replay.chunk: -1 must be positive"},
		{"log: {format: xml}\n", `log.format: "xml" is not text, json or auto`},
		{"tokens: {refresh_every: 10ms}\n", "tokens.refresh_every: 10ms must be within 100ms..1h0m0s (unset: 30s)"},
		{"tokens: {lookup_timeout: 1m}\n", "tokens.lookup_timeout: 1m0s must be within 10ms..30s (unset: 1s)"},
	} {
		path := writeFile(t, dir, "c.yaml", tt.body, 0o600)
		_, err := config.LoadConfig(path, envOf(nil))
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.body, tt.want)
			continue
		}
		lines := strings.Split(strings.TrimPrefix(err.Error(), "config "+path+": "), "\n")
		if len(lines) != 1 || lines[0] != tt.want {
			t.Errorf("%q: error lines %q, want exactly %q", tt.body, lines, tt.want)
		}
	}
}

// tokens.refresh_every and tokens.lookup_timeout: defaults when unset, the
// file's values when set.
func TestTokensConfig(t *testing.T) {
	t.Parallel()
	c, err := config.LoadConfig("", envOf(nil))
	if err != nil || c.Tokens.RefreshEvery != 30*time.Second || c.Tokens.LookupTimeout != time.Second {
		t.Fatalf("defaults: %+v, %v; want 30s and 1s", c.Tokens, err)
	}
	path := writeFile(t, t.TempDir(), "c.yaml", "tokens: {refresh_every: 5s, lookup_timeout: 250ms}\n", 0o600)
	if c, err = config.LoadConfig(path, envOf(nil)); err != nil || c.Tokens.RefreshEvery != 5*time.Second || c.Tokens.LookupTimeout != 250*time.Millisecond {
		t.Fatalf("set: %+v, %v", c.Tokens, err)
	}
}

// A tenant's min_confidence may be 0 (no transcript held back); unset, it
// is jobs' default.
func TestMinConfidenceZero(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "c.yaml", "pipeline:\n  tenants:\n    zero: {provider: generic-http, api_key: k, min_confidence: 0}\n    unset: {provider: generic-http, api_key: k}\n", 0o600)
	c, err := config.LoadConfig(path, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := c.PipelineConfig().WithDefaults()
	if m := p.Tenants["zero"].MinConfidence; m == nil || *m != 0 {
		t.Errorf("min_confidence: 0 read as %v, want 0", m)
	}
	if m := p.Tenants["unset"].MinConfidence; m == nil || *m != jobs.MinConfidenceDefault {
		t.Errorf("min_confidence unset: %v, want %v", m, jobs.MinConfidenceDefault)
	}
}
