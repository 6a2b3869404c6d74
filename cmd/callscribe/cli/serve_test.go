package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// serveTestToken is CALLSCRIBE_API_TOKEN of the tests that serve: long and
// varied enough to be accepted (tokens.CheckSecret).
const serveTestToken = "test-api-token-0123456789-abcdefghijklmnopqrstuv"

// TestServe runs `callscribe serve` in-process on a free port, takes and
// gives back a lease over HTTP, checks the token, then cancels the context
// (Ctrl-C) and sees exit 0.
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
	env := map[string]string{csconfig.EnvRedisURL: redisURL, csconfig.EnvAPIToken: serveTestToken}
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
	if code == 0 || !strings.Contains(stderr, csconfig.EnvRedisURL) {
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
	env := map[string]string{csconfig.EnvRedisURL: "redis://127.0.0.1:1/0"}
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
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key}\n"
	// An admission gate of a name no other run shares (its keys are in
	// the shared Redis under serve's own prefix).
	gateName := fmt.Sprintf("serve-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	body += "capacity:\n  gate: {name: " + gateName + ", size: 3, ceilings: {vendor_plan: 10}}\n"
	gateRedis := testredis.Client(t)
	t.Cleanup(func() { testredis.DeleteMatching(gateRedis, "*{gate/"+gateName+"}*") })
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
	// The admission gate: one call inside, shown on /metrics below.
	if code, got := call("POST", "/v1/gate/enter", `{"call_id":"call-1001"}`); code != 200 || got["uncounted"] != false {
		t.Fatalf("gate enter: %d %v", code, got)
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
		if c.path == "/metrics" && c.want == 200 {
			for _, want := range []string{`callscribe_gate_in_use{gate="` + gateName + `"} 1`, `callscribe_gate_admitted_total{gate="` + gateName + `"} 1`,
				`callscribe_gate_size{gate="` + gateName + `"} 3`, `callscribe_gate_wait_seconds_count{gate="` + gateName + `",outcome="admitted"} 1`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
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

// Issue 23, finding 11: a dial long-poll of 30 s in flight when serve is
// told to stop (SIGTERM, here the command's context) is answered with its
// call's state when the shutdown begins, not cut without an answer after
// the shutdown grace (10 s). Slot, start and gate waits end the same way
// (httpapi's TestAttackSlotWaitAnsweredOnShutdown).
func TestAttackServeLongPollAnsweredOnShutdown(t *testing.T) {
	t.Parallel()
	provider := fmt.Sprintf("serve-stop-%d-%d", os.Getpid(), capSeq.Add(1))
	call := provider + "-call"
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "capacity:\n  limits:\n    " + provider + "/stt: {limit: 1}\n" +
		"  agents:\n    out: {stt: [" + provider + "]}\n  max_dial_waiters: 1\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+provider+"*")
		testredis.DeleteMatching(rdb, "*"+call+"*")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	env := map[string]string{csconfig.EnvRedisURL: testredis.URL(), csconfig.EnvAPIToken: serveTestToken}
	go func() {
		done <- cli.Run(ctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0"},
			cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()
	base := serveBase(t, &out, &errOut, done)
	do := func(method, path, body string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		if err != nil {
			return 0, map[string]any{"error": err.Error()}
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+serveTestToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, map[string]any{"error": err.Error()}
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	// The provider's one slot is taken: the call queues.
	if code, got := do("POST", "/v1/leases", `{"provider":"`+provider+`","kind":"stt","holder":"fill","lane":"live"}`); code != 200 || got["granted"] != true {
		t.Fatalf("fill: %d %v", code, got)
	}
	if code, got := do("POST", "/v1/calls/"+call+"/dial", `{"agent":"out"}`); code != 202 {
		t.Fatalf("dial: %d %v, want 202 queued", code, got)
	}
	type answer struct {
		code int
		got  map[string]any
		took time.Duration
	}
	dialDone := make(chan answer, 1)
	go func() {
		for { // a probe below may hold the only place for a moment: retry
			start := time.Now()
			code, got := do("GET", "/v1/calls/"+call+"/dial?wait_ms=30000", "")
			if code != http.StatusTooManyRequests {
				dialDone <- answer{code, got, time.Since(start)}
				return
			}
		}
	}()
	// The long-poll waits once a second one is refused (max_dial_waiters 1).
	for {
		code, got := do("GET", "/v1/calls/"+call+"/dial?wait_ms=50", "")
		if code == http.StatusTooManyRequests {
			break
		}
		if code != http.StatusAccepted {
			t.Fatalf("probe: %d %v", code, got)
		}
	}
	cancel() // as SIGTERM
	select {
	case a := <-dialDone:
		if a.code != http.StatusAccepted || a.got["state"] != "queued" || a.got["call_id"] != call {
			t.Errorf("the long-poll at shutdown: %d %v after %s, want 202 queued", a.code, a.got, a.took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll: no answer 20 s after the shutdown began")
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestAttackWeakAPIToken: a guessable CALLSCRIBE_API_TOKEN, an admin's
// credential, is refused before serve starts, saying how to make one.
func TestAttackWeakAPIToken(t *testing.T) {
	t.Parallel()
	env := func(tok string) func(string) string {
		return func(k string) string {
			if k == csconfig.EnvAPIToken {
				return tok
			}
			return ""
		}
	}
	for _, weak := range []string{"a", "admin-tok", strings.Repeat("x", 64), "abcdefghijklmnoabcdefghijklmnoabcdefghijklmno"} {
		_, err := csconfig.LoadConfig("", env(weak))
		if err == nil {
			t.Fatalf("csconfig.LoadConfig with %s=%q: no error", csconfig.EnvAPIToken, weak)
		}
		for _, want := range []string{csconfig.EnvAPIToken, "openssl rand -base64 32", "callscribe tokens create --admin"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("csconfig.LoadConfig with %s=%q: %q does not say %q", csconfig.EnvAPIToken, weak, err, want)
			}
		}
	}
	var stderr strings.Builder
	code := cli.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0"}, cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: env("a")})
	if code == 0 || !strings.Contains(stderr.String(), csconfig.EnvAPIToken) || !strings.Contains(stderr.String(), "openssl rand -base64 32") {
		t.Fatalf("serve with %s=a: exit %d\n%s", csconfig.EnvAPIToken, code, stderr.String())
	}
	for _, good := range []string{
		"q0Zr8kS1vJ3mX9cT2wB7yN5uE4hL6pA0dF8gK1iO3s=",                           // openssl rand -base64 32
		"cs_7_6f1c0a9d2b3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f90", // callscribe tokens create --admin
	} {
		if _, err := csconfig.LoadConfig("", env(good)); err != nil {
			t.Errorf("csconfig.LoadConfig with a proper token: %v", err)
		}
	}
}

// The capacity API never waits on PostgreSQL: a `callscribe serve` with
// tenant tokens whose database is cut mid-run (its every connection goes
// through a proxy the test closes) keeps granting and releasing leases
// and slots for the tokens it read at start, whether it had seen them in
// a request or not; a token it does not know gets 503 with Retry-After
// (never a grant, never a 401), a malformed one 401; /metrics answers an
// admin and counts the tokens accepted from the stale cache. A token
// revoked during the outage keeps working until the database is back,
// then is refused; one revoked while the database is up is refused at
// once by notice (tokens.refresh_every is 10m, longer than the test).
func TestServeCapacityThroughDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	proxy := testdb.NewProxy(t, pool)
	provider := fmt.Sprintf("serve-pgcut-%d-%d", os.Getpid(), capSeq.Add(1))
	org := provider + "-org"
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+provider+"*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", org).Err()
	})
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	body := "tokens: {refresh_every: 10m}\ncapacity:\n  limits:\n    " + provider + "/stt: {limit: 4}\n  orgs:\n    " + org + ": {limit: 4}\n"
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	direct := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: testredis.URL()}
	create := func(args ...string) (string, int64) {
		t.Helper()
		code, out, stderr := run(t, ctx, direct, append([]string{"--config", cfgPath, "tokens", "create"}, args...)...)
		if code != 0 {
			t.Fatalf("tokens create %v: %d %s", args, code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		tok := lines[len(lines)-1]
		id, err := strconv.ParseInt(strings.Split(tok, "_")[1], 10, 64)
		if err != nil {
			t.Fatalf("token %.10q…: %v", tok, err)
		}
		return tok, id
	}
	used, usedID := create("--tenant", org)     // used before the cut
	unused, unusedID := create("--tenant", org) // first used during it
	admin, _ := create("--admin")

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sout, serr syncBuffer
	done := make(chan int, 1)
	env := map[string]string{csconfig.EnvDatabaseURL: proxy.URL(), csconfig.EnvRedisURL: testredis.URL()}
	go func() {
		done <- cli.Run(sctx, []string{"--config", cfgPath, "serve", "--addr", "127.0.0.1:0"}, cli.Env{Stdout: &sout, Stderr: &serr, Getenv: envOf(env)})
	}()
	base := serveBase(t, &sout, &serr, done)
	call := func(method, path, body, token string) (int, http.Header, map[string]any) {
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
		return resp.StatusCode, resp.Header, m
	}
	// liveCall takes and gives back a lease and a call slot with token:
	// what a live call does.
	round := 0
	liveCall := func(token, when string) {
		t.Helper()
		round++
		acquire := `{"provider":"` + provider + `","kind":"stt","holder":"call-` + strconv.Itoa(round) + `","lane":"live"}`
		code, _, got := call("POST", "/v1/leases", acquire, token)
		if code != 200 || got["granted"] != true || got["uncounted"] != false {
			t.Fatalf("%s: lease: %d %v\n%s", when, code, got, serr.String())
		}
		if code, _, got := call("POST", "/v1/leases/release", mustJSONString(t, map[string]any{"lease": got["lease"]}), token); code != http.StatusNoContent {
			t.Fatalf("%s: lease release: %d %v", when, code, got)
		}
		callID := fmt.Sprintf("%s-call-%d", org, round)
		code, _, got = call("POST", "/v1/slots", `{"org":"`+org+`"}`, token)
		if code != 200 {
			t.Fatalf("%s: slot: %d %v", when, code, got)
		}
		if code, _, got := call("POST", "/v1/slots/bind", mustJSONString(t, map[string]any{"slot": got["slot"], "call_id": callID}), token); code != http.StatusNoContent {
			t.Fatalf("%s: bind: %d %v", when, code, got)
		}
		if code, _, got := call("POST", "/v1/calls/"+callID+"/release", `{"org":"`+org+`"}`, token); code != http.StatusNoContent {
			t.Fatalf("%s: call release: %d %v", when, code, got)
		}
	}
	// refused asks the capacity API's status (which takes nothing) until
	// token is refused.
	refused := func(token string) func() bool {
		return func() bool {
			code, _, _ := call("GET", "/v1/status", "", token)
			return code == http.StatusUnauthorized
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	readyz := func(want int) func() bool {
		return func() bool { code, _, _ := call("GET", "/readyz", "", ""); return code == want }
	}

	liveCall(used, "before the cut")
	proxy.Cut()
	if !testwait.Until(30*time.Second, tick.C, readyz(http.StatusServiceUnavailable)) {
		t.Fatalf("/readyz still ready with the database cut")
	}
	for range 3 {
		liveCall(used, "database cut, a token seen before")
		liveCall(unused, "database cut, a token read at start")
	}
	unknown := "cs_999999999_" + strings.Repeat("ab", 32)
	if code, h, got := call("POST", "/v1/leases", `{"provider":"`+provider+`","kind":"stt","holder":"x","lane":"live"}`, unknown); code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
		t.Fatalf("database cut, an unknown token: %d Retry-After %q %v; want 503 with Retry-After: 1", code, h.Get("Retry-After"), got)
	}
	if code, _, got := call("POST", "/v1/leases", `{"provider":"`+provider+`","kind":"stt","holder":"x","lane":"live"}`, "nonsense"); code != http.StatusUnauthorized {
		t.Fatalf("database cut, a malformed token: %d %v; want 401", code, got)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// Each live call checks its token four times: 24 at least (the
	// scrape's own token is one more).
	stale := regexp.MustCompile(`(?m)^callscribe_auth_cache_hits_total\{source="stale"\} (\d+)$`).FindSubmatch(metrics)
	n := 0
	if stale != nil {
		n, _ = strconv.Atoi(string(stale[1]))
	}
	if resp.StatusCode != http.StatusOK || n < 24 {
		t.Fatalf("database cut, /metrics: %d, want 200 counting at least 24 stale acceptances:\n%s", resp.StatusCode, metrics)
	}

	// Revoked while serve cannot hear of it: the live calls it serves go
	// on until the database is back.
	if code, _, stderr := run(t, ctx, direct, "--config", cfgPath, "tokens", "revoke", strconv.FormatInt(usedID, 10)); code != 0 {
		t.Fatalf("tokens revoke: %s", stderr)
	}
	liveCall(used, "database cut, a token revoked meanwhile")
	proxy.Restore()
	if !testwait.Until(60*time.Second, tick.C, refused(used)) {
		t.Fatalf("the token revoked during the outage still works after the database came back:\n%s", serr.String())
	}
	if !testwait.Until(60*time.Second, tick.C, readyz(http.StatusOK)) {
		t.Fatalf("/readyz not ready after the database came back")
	}
	liveCall(unused, "database back")
	// Revoked while the database is up: refused by notice.
	if code, _, stderr := run(t, ctx, direct, "--config", cfgPath, "tokens", "revoke", strconv.FormatInt(unusedID, 10)); code != 0 {
		t.Fatalf("tokens revoke: %s", stderr)
	}
	if !testwait.Until(30*time.Second, tick.C, refused(unused)) {
		t.Fatalf("a token revoked with the database up still works:\n%s", serr.String())
	}

	log := serr.String()
	if !strings.Contains(log, "token accepted from the cache while the database cannot be reached") {
		t.Errorf("the stale acceptances are not logged:\n%s", log)
	}
	for _, tok := range []string{used, unused, admin} {
		if strings.Contains(log, tok[len(tok)-64:]) {
			t.Fatalf("the log holds a token's secret")
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
