package cli_test

import (
	"context"
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

// replay's flags are checked before anything is opened, naming the flag.
func TestReplayFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeFile(t, dir, "c.yaml", "crm_targets:\n  staging: {kind: webhook, base_url: 'http://127.0.0.1:3', token: s}\n", 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01"}, "give --from, --to and --target"},
		{[]string{"replay", "--from", "yesterday", "--to", "2026-02-01", "--target", "staging"}, "--from"},
		{[]string{"replay", "--from", "2026-02-01", "--to", "2026-01-01", "--target", "staging"}, "is not after"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "nope"}, "configured: staging"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "staging", "--max-rate", "-3"}, "--max-rate"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "staging", "--state", "done"}, "--state"},
		{[]string{"replay", "status", "x"}, `run "x"`},
		{[]string{"replay", "cancel", "0"}, `run "0"`},
	} {
		code, _, stderr := run(t, context.Background(), nil, append([]string{"--config", cfgPath}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("callscribe %v = %d, %q; want an error naming %q", c.args, code, stderr, c.want)
		}
	}
}
