package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testredis"
)

// TestServe runs `callscribe serve` in-process on a free port, takes and
// gives back a lease over HTTP, checks the token, then cancels the context
// (Ctrl-C) and sees exit 0.
// serveTestToken is CALLSCRIBE_API_TOKEN of the tests that serve: long and
// varied enough to be accepted (tokens.CheckSecret).
const serveTestToken = "test-api-token-0123456789-abcdefghijklmnopqrstuv"

func TestServe(t *testing.T) {
	t.Parallel()
	redisURL := testredis.URL()
	provider := fmt.Sprintf("serve-test-%d-%d", os.Getpid(), capSeq.Add(1))
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	org := provider + "-org"
	body := "capacity:\n  limits:\n    " + provider + "/stt: {limit: 1}\n  orgs:\n    " + org + ": {limit: 1}\n"
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+provider+"*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", org).Err()
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	env := map[string]string{config.EnvRedisURL: redisURL, config.EnvAPIToken: serveTestToken}
	go func() {
		done <- cli.Run(ctx, []string{"--config", cfgPath, "serve", "--addr", "127.0.0.1:0"},
			cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()

	base := serveBase(t, &out, &errOut, done)

	post := func(path, body, token string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	acquire := `{"provider":"` + provider + `","kind":"stt","holder":"call-1","lane":"live"}`
	if code, got := post("/v1/leases", acquire, ""); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d %v", code, got)
	}
	code, got := post("/v1/leases", acquire, serveTestToken)
	if code != 200 || got["granted"] != true || got["uncounted"] != false || got["limit"] != 1.0 {
		t.Fatalf("acquire: %d %v", code, got)
	}
	lease := mustJSONString(t, map[string]any{"lease": got["lease"]})
	if code, got := post("/v1/leases", acquire, serveTestToken); code != 200 || got["granted"] != false {
		t.Fatalf("over the limit: %d %v", code, got)
	}
	if code, got := post("/v1/leases/release", lease, serveTestToken); code != http.StatusNoContent {
		t.Fatalf("release: %d %v", code, got)
	}
	if code, got := post("/v1/leases", acquire, serveTestToken); code != 200 || got["granted"] != true {
		t.Fatalf("acquire after release: %d %v", code, got)
	}

	// capacity.orgs caps the organisation at one call.
	slotReq := `{"org":"` + org + `"}`
	if code, got := post("/v1/slots", slotReq, serveTestToken); code != 200 {
		t.Fatalf("slot: %d %v", code, got)
	} else if code, got := post("/v1/slots/bind", mustJSONString(t, map[string]any{"slot": got["slot"], "call_id": org + "-call"}), serveTestToken); code != 204 {
		t.Fatalf("bind: %d %v", code, got)
	}
	if code, got := post("/v1/slots", slotReq, serveTestToken); code != 409 || got["error"].(map[string]any)["org_limit"] != 1.0 {
		t.Fatalf("second slot of a one-call org: %d %v", code, got)
	}
	if code, got := post("/v1/calls/"+org+"-call/release", slotReq, serveTestToken); code != 204 {
		t.Fatalf("release call: %d %v", code, got)
	}
	if code, got := post("/v1/slots", slotReq, serveTestToken); code != 200 {
		t.Fatalf("slot after the call ended: %d %v", code, got)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after cancel:\n%s", code, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
	if resp, err := http.Get(base + "/v1/status"); err == nil {
		_ = resp.Body.Close()
		t.Fatal("still serving after exit")
	}
}

func TestServeNeedsRedis(t *testing.T) {
	t.Parallel()
	code, _, stderr := run(t, context.Background(), nil, "serve", "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, config.EnvRedisURL) {
		t.Fatalf("serve without Redis: %d %q", code, stderr)
	}
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServeRejectsBadOrgCaps(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte("capacity:\n  orgs:\n    acme: {limit: 4, campaigns: {spring: 9}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{config.EnvRedisURL: "redis://127.0.0.1:1/0"}
	code, _, stderr := run(t, context.Background(), env, "--config", cfgPath, "serve", "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "capacity.orgs") || !strings.Contains(stderr, "spring") {
		t.Fatalf("campaign cap above its org's: %d %q", code, stderr)
	}
}

var serveAddrRE = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)\n`)

// serveBase waits up to 15s for an in-process `callscribe serve` to print
// its address on out, and returns it; it fails the test if serve exits
// first (done) or prints none.
func serveBase(t *testing.T, out, errOut *syncBuffer, done <-chan int) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; {
		if m := serveAddrRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before listening:\n%s\n%s", code, out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no address:\n%s\n%s", out.String(), errOut.String())
		}
	}
}
