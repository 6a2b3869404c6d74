package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
)

// capsWithin is how long the caps test waits for a serve process to apply
// a stored cap: far above its 50ms capacity.caps_refresh, so a busy
// machine does not fail it.
const capsWithin = 20 * time.Second

// Two serve processes share one database and one Redis: the organisation's
// configured cap (1) refuses a second call on either; `orgs set` raises it
// to 2 and the second call is admitted without a restart, and lowered to 1
// again the next is refused. A campaign cap above the organisation's is
// refused naming the field, by the CLI and by PUT /v1/admin/...; a
// tenant's token gets 403 there; `orgs list --history` shows each change
// with who made it and why.
func TestOrgsSetAppliesToRunningServes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	org := fmt.Sprintf("cli-caps-%d-%d", os.Getpid(), capSeq.Add(1))
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+org+"}*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", org).Err()
	})
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "capacity:\n  caps_refresh: 50ms\n  orgs:\n    " + org + ": {limit: 1}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: testredis.URL(),
		csconfig.EnvAPIToken: serveTestToken}
	c := func(args ...string) (int, string, string) {
		t.Helper()
		return run(t, ctx, env, append([]string{"--config", config}, args...)...)
	}
	code, out, stderr := c("tokens", "create", "--tenant", org)
	if code != 0 {
		t.Fatalf("tokens create: %s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tenantToken := lines[len(lines)-1]

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bases [2]string
	var dones [2]chan int
	var serrs [2]*syncBuffer
	for i := range bases {
		var sout syncBuffer
		serrs[i], dones[i] = &syncBuffer{}, make(chan int, 1)
		go func() {
			dones[i] <- cli.Run(sctx, []string{"--config", config, "serve", "--no-workers", "--addr", "127.0.0.1:0"},
				cli.Env{Stdout: &sout, Stderr: serrs[i], Getenv: envOf(env)})
		}()
		bases[i] = serveBase(t, &sout, serrs[i], dones[i])
	}
	call := func(base, method, path, token, body string) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	slot := `{"org":"` + org + `"}`
	take := func(base string) (int, map[string]any) { return call(base, "POST", "/v1/slots", serveTestToken, slot) }
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()

	if code, got := take(bases[0]); code != 200 {
		t.Fatalf("first call on serve 0: %d %v", code, got)
	}
	if code, got := take(bases[1]); code != 409 {
		t.Fatalf("second call on serve 1 at the configured cap 1: %d %v, want 409", code, got)
	}
	if code, _, stderr := c("orgs", "set", org, "--limit", "2", "--reason", "spring sale"); code != 0 {
		t.Fatalf("orgs set --limit 2: %s", stderr)
	}
	var second map[string]any
	if !testwait.Until(capsWithin, tick.C, func() bool {
		code, got := take(bases[1])
		second = got
		return code == 200
	}) {
		t.Fatalf("serve 1 still refuses the second call %s after orgs set raised the cap to 2\n%s", capsWithin, serrs[1].String())
	}
	// Serve 0 applied it too: the third call is refused at cap 2.
	if !testwait.Until(capsWithin, tick.C, func() bool {
		code, got := take(bases[0])
		return code == 409 && got["error"].(map[string]any)["org_limit"] == 2.0
	}) {
		t.Fatal("serve 0 does not refuse a third call at cap 2")
	}
	// Lowered to 1 (both serves say so while two calls are live), then
	// with one of the two calls ended, the next is refused.
	if code, _, stderr := c("orgs", "set", org, "--limit", "1"); code != 0 {
		t.Fatalf("orgs set --limit 1: %s", stderr)
	}
	for i, base := range bases {
		if !testwait.Until(capsWithin, tick.C, func() bool {
			code, got := take(base)
			return code == 409 && got["error"].(map[string]any)["org_limit"] == 1.0
		}) {
			t.Fatalf("serve %d does not apply the lowered cap 1", i)
		}
	}
	if code, got := call(bases[1], "POST", "/v1/slots/release", serveTestToken, mustJSONString(t, map[string]any{"slot": second["slot"]})); code != 204 {
		t.Fatalf("release: %d %v", code, got)
	}
	for i, base := range bases {
		if code, got := take(base); code != 409 || got["error"].(map[string]any)["org_in_use"] != 1.0 {
			t.Fatalf("serve %d with one call live at cap 1: %d %v, want 409", i, code, got)
		}
	}

	// A campaign above its organisation: refused naming the field, by the
	// CLI and over HTTP.
	code, _, stderr = c("campaigns", "set", org, "spring", "--limit", "3")
	if code == 0 || !strings.Contains(stderr, "limit 3 is above organisation "+org+"'s cap 1") {
		t.Fatalf("campaigns set above the org: %d %q, want the limit refused", code, stderr)
	}
	code, got := call(bases[0], "PUT", "/v1/admin/orgs/"+org+"/campaigns/spring", serveTestToken, `{"limit": 3}`)
	if e, _ := got["error"].(map[string]any); code != 400 || e["field"] != "limit" || !strings.Contains(e["message"].(string), "above organisation") {
		t.Fatalf("PUT a campaign above its org: %d %v, want 400 naming limit", code, got)
	}
	if code, got := call(bases[0], "PUT", "/v1/admin/orgs/"+org+"/campaigns/spring", serveTestToken, `{"limit": 1, "reason": "pilot"}`); code != 200 {
		t.Fatalf("PUT a campaign at its org's cap: %d %v", code, got)
	}
	for _, m := range []string{"GET", "PUT"} {
		if code, got := call(bases[1], m, "/v1/admin/orgs/"+org, tenantToken, `{"limit": 5}`); code != 403 {
			t.Fatalf("%s /v1/admin/orgs/%s with the organisation's own token: %d %v, want 403", m, org, code, got)
		}
	}
	if code, _ := call(bases[1], "GET", "/v1/admin/orgs", "", ""); code != 401 {
		t.Fatalf("GET /v1/admin/orgs without a token: %d, want 401", code)
	}

	code, out, stderr = c("orgs", "list", "--history", "--org", org)
	if code != 0 {
		t.Fatalf("orgs list --history: %s", stderr)
	}
	listedOrg := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		listedOrg = listedOrg || len(f) > 2 && f[0] == org && f[1] == "1" && f[2] == "stored"
	}
	if !listedOrg {
		t.Errorf("orgs list does not show %s at its stored cap 1:\n%s", org, out)
	}
	for _, want := range []string{"spring sale", "admin token (CALLSCRIBE_API_TOKEN)", "pilot"} {
		if !strings.Contains(out, want) {
			t.Errorf("orgs list --history lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = c("orgs", "list", "--history", "--org", org, "--json")
	if code != 0 {
		t.Fatalf("orgs list --json: %s", stderr)
	}
	var listed struct {
		Changes []struct {
			Campaign   string `json:"campaign"`
			PriorLimit *int   `json:"prior_limit"`
			Limit      int    `json:"limit"`
			Reason     string `json:"reason"`
			By         string `json:"by"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var trail []string
	for _, ch := range listed.Changes {
		prior := "none"
		if ch.PriorLimit != nil {
			prior = fmt.Sprint(*ch.PriorLimit)
		}
		trail = append(trail, fmt.Sprintf("%s %s->%d %q", ch.Campaign, prior, ch.Limit, ch.Reason))
		if ch.By == "" {
			t.Errorf("change without who made it: %+v", ch)
		}
	}
	want := []string{`spring none->1 "pilot"`, ` 2->1 ""`, ` none->2 "spring sale"`}
	if strings.Join(trail, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit trail:\n%s\nwant:\n%s", strings.Join(trail, "\n"), strings.Join(want, "\n"))
	}
	code, out, stderr = c("campaigns", "list", "--org", org)
	if code != 0 || !strings.Contains(out, "spring") || !strings.Contains(out, "pilot") {
		t.Fatalf("campaigns list: %d %s %s", code, out, stderr)
	}

	cancel()
	for i, done := range dones {
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("serve %d exited %d:\n%s", i, code, serrs[i].String())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("serve %d did not stop", i)
		}
	}
}
