package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testredis"
)

// TestPythonLiveCallClient runs docs/examples/live_call.py (standard
// library only) against a real `callscribe serve`: the call takes its
// slot, binds it, connects its transcriber, speaks three replies (the
// primary voice is full, so each overflows to the fallback), refreshes its
// lease and gives everything back; its timeline shows the overflows. Then
// it opens one more voice stream, which the vendor refuses with 3 in use of
// the limit 4: the client reports it and the limit becomes 2.
func TestPythonLiveCallClient(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed to run the documented Python client (docs/examples/live_call.py): apt-get install -y python3")
	}
	redisURL := testredis.URL()
	id := fmt.Sprintf("py-%d-%d", os.Getpid(), capSeq.Add(1))
	stt, voice, fallback, org, refusing := id+"-stt", id+"-voice", id+"-fallback", id+"-org", id+"-refusing"
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := fmt.Sprintf(`capacity:
  limits:
    %[1]s/stt: {limit: 2}
    %[2]s/tts: {limit: 0}
    %[3]s/tts: {limit: 1}
    %[5]s/tts: {limit: 4}
  orgs:
    %[4]s: {limit: 1, campaigns: {spring: 1}}
  agents:
    support: {stt: [%[1]s], tts: [%[2]s, %[3]s]}
`, stt, voice, fallback, org, refusing)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+id+"*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", org).Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	env := map[string]string{csconfig.EnvRedisURL: redisURL, csconfig.EnvAPIToken: serveTestToken}
	go func() {
		done <- cli.Run(ctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0"},
			cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()
	base := serveBase(t, &out, &errOut, done)

	// Two streams of the refusing vendor are held elsewhere.
	var others []any
	for i := range 2 {
		code, grant := postJSON(t, base+"/v1/leases", serveTestToken,
			fmt.Sprintf(`{"provider":%q,"kind":"tts","holder":"other-%d","lane":"live"}`, refusing, i))
		if code != http.StatusOK || grant["granted"] != true {
			t.Fatalf("a lease of %s: %d %v", refusing, code, grant)
		}
		others = append(others, grant["lease"])
	}

	callID := id + "-call"
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "..", "..", "docs", "examples", "live_call.py"),
		"--base", base, "--token", serveTestToken, "--org", org, "--campaign", "spring", "--agent", "support",
		"--call-id", callID, "--replies", "3", "--refused", refusing+"/tts")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("live_call.py: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, stdout.String(), stderr.String(), errOut.String())
	}
	got := stdout.String()
	for _, want := range []string{
		"slot counted\n",
		"bound " + callID + "\n",
		"transcriber " + stt + "\n",
		"reply 1 " + fallback + " fallback waited 0ms\n",
		"reply 3 " + fallback + " fallback waited 0ms\n",
		"refreshed 1 lost 0\n",
		"released\n",
		"timeline voice_overflow voice_overflow voice_overflow\n",
		"refusal reported " + refusing + "/tts in use 3: limit 4 -> 2 lowered\n",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("live_call.py printed:\n%s\nwant a line %q", got, want)
		}
	}

	for _, l := range others {
		lease, _ := json.Marshal(l)
		if code, got := postJSON(t, base+"/v1/leases/release", serveTestToken, `{"lease":`+string(lease)+`}`); code != http.StatusNoContent {
			t.Fatalf("release: %d %v", code, got)
		}
	}

	// Everything was given back: the next call of the organisation gets
	// its one slot and the STT provider is idle. The refusing vendor's
	// limit is the learned 2.
	status := getJSON(t, base+"/v1/status", serveTestToken)
	learned := false
	for _, p := range status["providers"].([]any) {
		pm := p.(map[string]any)
		if strings.HasPrefix(fmt.Sprint(pm["provider"]), id) && pm["in_use"].(float64) != 0 {
			t.Fatalf("after the call: %v still in use", pm)
		}
		if pm["provider"] == refusing {
			if pm["effective_limit"] != 2.0 || pm["learned"] != true || pm["configured_limit"] != 4.0 {
				t.Fatalf("the refusing vendor after the report: %v, want the learned limit 2", pm)
			}
			learned = true
		}
	}
	if !learned {
		t.Fatalf("no %s in %v", refusing, status)
	}
	again := exec.CommandContext(ctx, python, filepath.Join("..", "..", "..", "docs", "examples", "live_call.py"),
		"--base", base, "--token", serveTestToken, "--org", org, "--campaign", "spring", "--agent", "support",
		"--call-id", callID+"-2", "--replies", "1")
	if outb, err := again.CombinedOutput(); err != nil {
		t.Fatalf("a second call after the first gave everything back: %v\n%s", err, outb)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// postJSON POSTs body to url with a bearer token and decodes the JSON
// answer, if any.
func postJSON(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
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

// getJSON GETs url with a bearer token and decodes its JSON object; any
// answer but 200 fails the test.
func getJSON(t *testing.T, url, token string) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return m
}
