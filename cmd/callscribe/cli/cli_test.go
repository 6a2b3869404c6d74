package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func run(t *testing.T, ctx context.Context, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut syncBuffer
	code := cli.Run(ctx, args, cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	return code, out.String(), errOut.String()
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.NewEmpty(t)
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}

	code, out, stderr := run(t, ctx, env, "migrate", "status")
	if code != 0 || !strings.Contains(out, "pending") {
		t.Fatalf("status before up: %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(t, ctx, env, "migrate", "up")
	if code != 0 || !strings.Contains(out, "00001_ledger.sql") {
		t.Fatalf("up: %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = run(t, ctx, env, "migrate", "up")
	if code != 0 || !strings.Contains(out, "nothing to apply") {
		t.Fatalf("second up: %d\n%s", code, out)
	}
	code, out, _ = run(t, ctx, env, "migrate", "status")
	if code != 0 || !strings.Contains(out, ", 0 pending") {
		t.Fatalf("status after up: %d\n%s", code, out)
	}
	code, out, _ = run(t, ctx, env, "migrate", "down")
	if code != 0 || !strings.Contains(out, "down callscribe 000") {
		t.Fatalf("down: %d\n%s", code, out)
	}
	code, out, _ = run(t, ctx, env, "migrate", "down", "--all")
	if code != 0 || !strings.Contains(out, "down river") {
		t.Fatalf("down --all: %d\n%s", code, out)
	}
	code, out, _ = run(t, ctx, env, "ledger", "purge")
	if code == 0 {
		t.Fatalf("purge on an empty schema succeeded:\n%s", out)
	}
	if code, out, _ = run(t, ctx, env, "migrate", "up"); code != 0 {
		t.Fatalf("up again: %d\n%s", code, out)
	}
	code, out, stderr = run(t, ctx, env, "ledger", "purge")
	if code != 0 || !strings.Contains(out, "purged 0 recordings") {
		t.Fatalf("purge: %d\n%s\n%s", code, out, stderr)
	}
}

func TestCommandsNeedingADatabaseSaySo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"migrate", "up"}, {"ledger", "purge"}} {
		code, _, stderr := run(t, context.Background(), nil, args...)
		if code == 0 || !strings.Contains(stderr, csconfig.EnvDatabaseURL+" is not set") {
			t.Errorf("%v without a database: %d %q", args, code, stderr)
		}
	}
}

// A bad flag or argument is refused as the command line gives it, naming
// it, before anything is opened: with no database configured, the error is
// the flag's, not the missing database's.
func TestBadFlagsRefusedBeforeOpening(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "list", "--state", "cooking"}, `--state "cooking"`},
		{[]string{"jobs", "list", "--limit", "-1"}, "--limit -1"},
		{[]string{"jobs", "show", "--tenant", "t"}, "--call"},
		{[]string{"jobs", "retry", "not-a-uuid"}, `recording id "not-a-uuid"`},
		{[]string{"batches", "list", "--state", "cooking"}, `--state "cooking"`},
		{[]string{"batches", "show", ""}, "ID|KEY"},
		{[]string{"outbox", "list", "--state", "lost"}, "--state"},
		{[]string{"outbox", "retry", "x"}, "x"},
		{[]string{"scopes", "audit", "--since", "-1h"}, "--since -1h0m0s"},
		{[]string{"scopes", "resume", ""}, "SCOPE"},
		{[]string{"rollout", "report", "--since", "-1h"}, "--since -1h0m0s"},
		{[]string{"rollout", "set", "c1", "loud"}, "loud"},
		{[]string{"replay", "status", "x"}, "x"},
		{[]string{"replay", "cancel", "x"}, "x"},
		{[]string{"orgs", "set", "acme"}, "--limit 0"},
		{[]string{"orgs", "set", "acme", "--limit", "10001"}, "--limit 10001"},
		{[]string{"orgs", "set", "x}y", "--limit", "2"}, "ORG"},
		{[]string{"campaigns", "set", "acme", "spring", "--limit", "21"}, "--limit 21"},
		{[]string{"campaigns", "set", "acme", "a:b", "--limit", "2"}, "CAMPAIGN"},
		{[]string{"campaigns", "list", "--org", "x y"}, "--org"},
		{[]string{"orgs", "list", "--history", "--limit", "-1"}, "--limit -1"},
	} {
		code, _, stderr := run(t, context.Background(), nil, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, csconfig.EnvDatabaseURL) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q before the database is asked for", c.args, code, stderr, c.want)
		}
	}
}

func TestBadConfigIsNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct{ file, body, want string }{
		{"typo.yaml", "retry_afterr:\n  max_delay: 1h\n", "field retry_afterr not found"},
		{"level.yaml", "log:\n  level: loud\n", "log.level"},
		{"dur.yaml", "retry_after:\n  max_delay: soon\n", "soon"},
		{"order.yaml", "retry_after:\n  base_backoff: 10m\n  max_backoff: 1m\n", "retry_after.max_backoff: 1m0s must be >= retry_after.base_backoff"},
		{"clamp.yaml", "retry_after:\n  max_backoff: 2h\n", "retry_after.max_delay: 1h0m0s must be >= retry_after.max_backoff"},
	}
	for _, tt := range tests {
		code, _, stderr := run(t, context.Background(), nil, "--config", write(tt.file, tt.body), "migrate", "status")
		if code == 0 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, tt.file) {
			t.Errorf("%s: code %d, stderr %q; want it to name %q and the file", tt.file, code, stderr, tt.want)
		}
	}
	code, _, stderr := run(t, context.Background(), nil, "--config", filepath.Join(dir, "missing.yaml"), "migrate", "status")
	if code == 0 || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing config file: %d %q", code, stderr)
	}
}

// The demo starts real throwaway services, runs the pipeline against a
// misbehaving vendor, reports with every invariant held, and on Ctrl-C
// (--hold) stops the services and removes their files.
func TestDemoRunsThePipelineAndStopsCleanly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	args := []string{"demo", "--recordings", "../../../testdata/recordings", "--copies", "1", "--hold",
		"--cooldown", "300ms", "--rate-limit-share", "0.2", "--processing-time", "200ms"}
	go func() {
		done <- cli.Run(ctx, args, cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(nil)})
	}()
	deadline := time.After(120 * time.Second)
	for !strings.Contains(out.String(), "holding the services") {
		select {
		case code := <-done:
			t.Fatalf("demo exited early with %d\n%s\n%s", code, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("demo not done after 120s\n%s\n%s", out.String(), errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	text := out.String()
	for _, want := range []string{"recordings by state:            committed 12", "action sets applied more than once in the CRM: 0", "invariants:                     all held",
		"submissions that ignored a known cooldown: 0 (must be 0)", "admission → send gap:", "psql", "redis-cli",
		"batch lane, its 6 recordings again", "one by one:", "in manifests:", "× fewer"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	var dir string
	for _, line := range strings.Split(text, "\n") {
		if _, after, ok := strings.Cut(line, "psql -h "); ok {
			dir = strings.Fields(after)[0]
			break
		}
	}
	if _, err := os.Stat(dir); dir == "" || err != nil {
		t.Fatalf("cluster directory %q: %v", dir, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo exited %d after Ctrl-C\n%s", code, errOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not stop within 60s of Ctrl-C")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s still exists after the demo stopped (%v)", dir, err)
	}
	if !strings.Contains(out.String(), "callscribe demo: stopped.") {
		t.Fatalf("no stop message:\n%s", out.String())
	}
}

// The production binary carries no development tools: testenv (which can
// run apt-get) is internal/cmd/testenv, run by `make test`.
func TestHelpListsNoTestenv(t *testing.T) {
	t.Parallel()
	code, out, stderr := run(t, context.Background(), nil, "--help")
	if code != 0 || !strings.Contains(out, "worker") {
		t.Fatalf("--help: code %d\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(out, "testenv") {
		t.Errorf("--help lists testenv:\n%s", out)
	}
	if code, _, _ := run(t, context.Background(), nil, "testenv", "--", "true"); code == 0 {
		t.Error("testenv still runs as a subcommand")
	}
}

// A tenant's crm section is read into crm/connector's configuration; its keys
// are checked like every other.
func TestTenantCRMConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `pipeline:
  sweep_interval: 2m
  tenants:
    acme:
      provider: generic-http
      api_key: k
      crm: {kind: salesforce, base_url: "https://acme.example", token: tok, sobject: Event, production: true, delivery_deadline: 6h}
crm_targets:
  staging: {kind: webhook, base_url: "http://127.0.0.1:1", token: s}
`)
	c, err := csconfig.LoadConfig(good, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	crm := c.Pipeline.Tenants["acme"].CRM
	if crm.Kind != "salesforce" || crm.BaseURL != "https://acme.example" || crm.Token != "tok" || crm.SObject != "Event" || !crm.Production ||
		crm.DeliveryDeadline != 6*time.Hour {
		t.Errorf("tenant crm = %v", crm)
	}
	if p := c.PipelineConfig(); p.Tenants["acme"].Provider != "generic-http" || p.SweepInterval != 2*time.Minute {
		t.Errorf("pipeline config = %+v", p)
	}
	if st := c.CRMTargets["staging"]; st.Kind != "webhook" || st.Token != "s" {
		t.Errorf("crm_targets.staging = %v", st)
	}
	for _, tt := range []struct{ file, body, want string }{
		{"crmkey.yaml", "pipeline:\n  tenants:\n    acme: {provider: generic-http, crm: {kind: webhook, tokn: x}}\n", "field tokn not found"},
		{"crmkind.yaml", "pipeline:\n  tenants:\n    acme: {provider: generic-http, crm: {kind: fax}}\n", "pipeline.tenants.acme.crm.kind"},
		{"tenantkey.yaml", "pipeline:\n  tenants:\n    acme: {provider: generic-http, mdl: x}\n", "field mdl not found"},
		{"deadline.yaml", "pipeline:\n  tenants:\n    acme: {provider: generic-http, crm: {kind: webhook, delivery_deadline: -1h}}\n", "pipeline.tenants.acme.crm.delivery_deadline"},
		{"targetdeadline.yaml", "crm_targets:\n  staging: {kind: webhook, delivery_deadline: -1h}\n", "crm_targets.staging.delivery_deadline"},
	} {
		code, _, stderr := run(t, context.Background(), nil, "--config", write(tt.file, tt.body), "migrate", "status")
		if code == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: code %d, stderr %q; want it to name %q", tt.file, code, stderr, tt.want)
		}
	}
}
