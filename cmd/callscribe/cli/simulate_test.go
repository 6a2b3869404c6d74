package cli_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
)

// `simulate stt` serves the simulator with the in-flight limit of its flags
// and reports the refusals over it when stopped.
func TestSimulateSTTInFlightLimit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	args := []string{"simulate", "stt", "--addr", "127.0.0.1:0", "--max-in-flight", "1", "--in-flight-retry-after", "3s",
		"--async-share", "1", "--processing-time", "1h"}
	go func() {
		done <- cli.Run(ctx, args, cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(nil)})
	}()
	var base string
	deadline := time.After(30 * time.Second)
	for base == "" {
		if _, after, ok := strings.Cut(out.String(), "simulator on "); ok {
			base = strings.Fields(after)[0]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("simulate exited early with %d\n%s\n%s", code, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("simulate did not start within 30s\n%s\n%s", out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	submit := func(key string) (int, string, string) {
		t.Helper()
		body := `{"audio_url": "https://objects.example.com/a.wav", "audio_sha256": "` + strings.Repeat("ab", 32) + `"}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/transcriptions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer sim-key")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(data)
	}
	if code, _, body := submit("first"); code != http.StatusAccepted {
		t.Fatalf("first submission: %d %s", code, body)
	}
	if code, retryAfter, body := submit("second"); code != http.StatusTooManyRequests || retryAfter != "3" ||
		!strings.Contains(body, "too many concurrent requests") {
		t.Fatalf("second submission: %d, Retry-After %q, %s", code, retryAfter, body)
	}
	tr.CloseIdleConnections()

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("simulate exited %d after Ctrl-C\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("simulate did not stop within 30s of Ctrl-C")
	}
	if want := "submissions 2, accepted 1, 429s 1 (1 over the in-flight limit)"; !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}
}

func TestSimulateSTTRefusesANegativeLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ flag, field string }{
		{"--max-in-flight=-1", "Config.MaxInFlight"},
		{"--in-flight-retry-after=-1s", "Config.InFlightRetryAfter"},
	} {
		code, _, stderr := run(t, context.Background(), nil, "simulate", "stt", "--addr", "127.0.0.1:0", c.flag)
		if code == 0 || !strings.Contains(stderr, c.field) {
			t.Errorf("%s: exit %d, stderr %q; want an error naming %s", c.flag, code, stderr, c.field)
		}
	}
}
