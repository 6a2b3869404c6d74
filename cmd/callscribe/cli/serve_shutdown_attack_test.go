package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testredis"
)

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
