package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
)

// Tokens made by `callscribe tokens create` authenticate `callscribe
// serve`: organisation A's token cannot release B's call (404, as for a
// call that does not exist), a revoked token is refused (as soon as
// serve's token cache hears of it), and serve will
// not listen on a public address with no authentication configured.
func TestServeWithTenantTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	prefix := fmt.Sprintf("tok-%d-%d", os.Getpid(), capSeq.Add(1))
	orgA, orgB := prefix+"-a", prefix+"-b"
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+prefix+"*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", orgA, orgB).Err()
	})
	config := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(config, []byte("capacity:\n  orgs:\n    "+orgA+": {limit: 1}\n    "+orgB+": {limit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvRedisURL: testredis.URL(), csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	c := func(args ...string) (int, string, string) {
		return run(t, ctx, env, append([]string{"--config", config}, args...)...)
	}
	token := func(args ...string) (string, string) {
		t.Helper()
		code, out, stderr := c(append([]string{"tokens", "create"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "cs_") {
			t.Fatalf("tokens create %v: %d %q %q", args, code, out, stderr)
		}
		id := regexp.MustCompile(`^token (\d+) `).FindStringSubmatch(lines[0])
		return id[1], lines[1]
	}
	_, tokA := token("--tenant", orgA, "--name", "dialer a")
	idB, tokB := token("--tenant", orgB)
	if code, _, stderr := c("tokens", "create", "--tenant", orgA, "--admin"); code == 0 || !strings.Contains(stderr, "not both") {
		t.Fatalf("create with --tenant and --admin: %d %q", code, stderr)
	}

	// No authentication configured: a public address is refused.
	if code, _, stderr := run(t, ctx, map[string]string{csconfig.EnvRedisURL: testredis.URL()}, "--config", config,
		"serve", "--addr", "0.0.0.0:0"); code == 0 || !strings.Contains(stderr, "without authentication") {
		t.Fatalf("serve on 0.0.0.0 without authentication: %d %q", code, stderr)
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(sctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0"},
			cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()
	base := serveBase(t, &out, &errOut, done)
	var lastBody string
	post := func(path, body, tok string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		lastBody = string(b)
		return resp.StatusCode
	}
	get := func(path, tok string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/slots", `{"org":"`+orgB+`"}`, tokB); code != 200 {
		t.Fatalf("B acquires: %d", code)
	}
	slot := lastBody[strings.Index(lastBody, `{"org"`):strings.LastIndex(lastBody, "}")]
	if code := post("/v1/slots/bind", `{"slot":`+slot+`,"call_id":"call-1"}`, tokB); code != 204 {
		t.Fatalf("B binds: %d", code)
	}
	if code := post("/v1/calls/call-1/release", `{"org":"`+orgB+`"}`, tokA); code != 404 {
		t.Fatalf("A's token releasing B's call: %d, want 404", code)
	}
	if code := post("/v1/slots", `{"org":"`+orgB+`"}`, tokB); code != 409 {
		t.Fatalf("B still at its cap of 1 after A's attempt: %d, want 409", code)
	}
	if code := post("/v1/slots", `{"org":"`+orgA+`"}`, tokA); code != 200 {
		t.Fatalf("A acquires its own: %d", code)
	}
	if code := post("/v1/slots", `{"org":"`+orgA+`"}`, "cs_1_"+strings.Repeat("0", 64)); code != 401 {
		t.Fatalf("a made-up token: %d, want 401", code)
	}
	if code, out, stderr := c("tokens", "revoke", idB); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %d %q %q", code, out, stderr)
	}
	// The capacity API checks tokens in serve's token cache, which hears
	// of the revocation by notice a moment after it commits.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	if !testwait.Until(30*time.Second, tick.C, func() bool { return get("/v1/status", tokB) == 401 }) {
		t.Fatalf("B's revoked token still works on serve")
	}
	if code := post("/v1/calls/call-1/release", `{"org":"`+orgB+`"}`, tokB); code != 401 {
		t.Fatalf("B's revoked token: %d, want 401", code)
	}
	code, listed, _ := c("tokens", "list")
	if code != 0 || !strings.Contains(listed, "dialer a") || strings.Contains(listed, tokA[len(tokA)-64:]) {
		t.Fatalf("tokens list:\n%s", listed)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}
}
