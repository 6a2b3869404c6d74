package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// serve runs the recordings API and the workers in one process: a
// recording fed with curl's request is committed, readable over the API;
// /healthz and /readyz answer; Ctrl-C drains and stops.
func TestServeIngestsAndDrives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	sim, err := sttsim.New(sttsim.Config{RateLimitShare: 0.2, Cooldown: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\nretry_after: {base_backoff: 50ms, max_backoff: 500ms}\n" +
		"pipeline:\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: testredis.URL()}
	code, out, stderr := run(t, ctx, env, "--config", config, "tokens", "create", "--tenant", "northline")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 {
		t.Fatalf("tokens create: %s", stderr)
	}
	token := lines[len(lines)-1]

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sout, serr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(sctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0"}, cli.Env{Stdout: &sout, Stderr: &serr, Getenv: envOf(env)})
	}()
	base := serveBase(t, &sout, &serr, done)
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, rd)
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
	if code, got := call("GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz: %d %v", code, got)
	}
	if code, got := call("GET", "/readyz", ""); code != 200 || got["postgres"] != "ok" || got["redis"] != "ok" {
		t.Fatalf("readyz: %d %v", code, got)
	}
	if code, got := call("POST", "/v1/recordings", `{"call_id":"call-1001","audio":"northline/call-1001.wav","lane":"immediate"}`); code != 201 {
		t.Fatalf("create: %d %v", code, got)
	}
	var state string
	for deadline := time.Now().Add(60 * time.Second); state != "committed"; time.Sleep(100 * time.Millisecond) {
		_, got := call("GET", "/v1/recordings/call-1001", "")
		if recs, ok := got["recordings"].([]any); ok && len(recs) == 1 {
			state, _ = recs[0].(map[string]any)["state"].(string)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not committed after 60s (state %q):\n%s", state, serr.String())
		}
	}
	// The capacity API answers on the same port, with the same token.
	if code, got := call("GET", "/v1/status", ""); code != 200 {
		t.Fatalf("capacity status: %d %v", code, got)
	}
	// A made-up token is refused, and counted.
	breq, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/recordings", nil)
	breq.Header.Set("Authorization", "Bearer cs_1_"+strings.Repeat("0", 64))
	if bresp, err := http.DefaultClient.Do(breq); err != nil || bresp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a made-up token: %v %v", bresp, err)
	} else {
		_ = bresp.Body.Close()
	}
	// River UI: an admin's, not a tenant's.
	_, out, _ = run(t, ctx, env, "--config", config, "tokens", "create", "--admin")
	admin := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	for _, c := range []struct {
		path, tok string
		want      int
	}{{"/riverui/", token, 401}, {"/riverui/", admin, 200}, {"/metrics", token, 401}, {"/metrics", admin, 200}} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s with a %s token: %d, want %d", c.path, map[bool]string{true: "tenant", false: "admin"}[c.tok == token], resp.StatusCode, c.want)
		}
		if c.path == "/metrics" && c.want == 200 && (!strings.Contains(string(b), "callscribe_submissions_per_transcript_count 1") ||
			!strings.Contains(string(b), "callscribe_auth_failures_total 1")) {
			t.Errorf("/metrics lacks the one committed transcript:\n%.2000s", b)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, serr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("serve did not stop within 45s of Ctrl-C")
	}
}
