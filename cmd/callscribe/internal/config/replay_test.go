package config_test

import (
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// A replay target needs a scope of its own: a tenant's CRM scope is
// refused, naming the key; a bad delivery deadline or replay section too.
func TestReplayConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tenant := "pipeline:\n  tenants:\n    northline: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k,\n" +
		"                crm: {kind: webhook, base_url: 'http://127.0.0.1:2', token: t}}\n"
	for _, c := range []struct{ body, want string }{
		{tenant + "crm_targets:\n  staging: {kind: webhook, base_url: 'http://127.0.0.1:3', token: s, scope: 'crm:northline:webhook'}\n",
			`crm_targets.staging.scope: "crm:northline:webhook" is tenant northline's CRM scope`},
		{"crm_targets:\n  staging: {kind: webhook, base_url: 'http://127.0.0.1:3', token: s, delivery_deadline: -1h}\n",
			"crm_targets.staging.delivery_deadline"},
		{"replay: {workers: -1}\n", "replay.workers"},
	} {
		path := writeFile(t, dir, "c.yaml", c.body, 0o600)
		if _, err := config.LoadConfig(path, envOf(nil)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config.LoadConfig(%q) = %v, want an error naming %q", c.body, err, c.want)
		}
	}
	ok := writeFile(t, dir, "ok.yaml", tenant+"crm_targets:\n  staging: {kind: webhook, base_url: 'http://127.0.0.1:3', token: s, delivery_deadline: 2h}\n", 0o600)
	if _, err := config.LoadConfig(ok, envOf(nil)); err != nil {
		t.Fatalf("a staging target with its default scope and a deadline: %v", err)
	}
}
