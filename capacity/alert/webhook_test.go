package alert_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/alert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var learned = capacity.LimitLearned{Provider: "vox", Kind: "stt", ConfiguredLimit: 8, From: 8, LearnedLimit: 5, InUse: 6,
	At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}

// An alert is POSTed as JSON with the bearer token; a 503 is retried.
func TestWebhookDeliversAndRetries(t *testing.T) {
	type got struct {
		auth, ctype string
		body        map[string]any
	}
	bodies := make(chan got, 10)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		bodies <- got{r.Header.Get("Authorization"), r.Header.Get("Content-Type"), m}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	w, err := alert.NewWebhook(alert.WebhookConfig{URL: srv.URL, Token: "s3cret", Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Notify(learned)
	g := <-bodies
	if g.auth != "Bearer s3cret" || g.ctype != "application/json" {
		t.Fatalf("headers: %q %q", g.auth, g.ctype)
	}
	want := map[string]any{"provider": "vox", "kind": "stt", "configured_limit": 8.0, "learned_limit": 5.0, "at": "2030-01-02T03:04:05Z"}
	if len(g.body) != len(want) {
		t.Fatalf("body %v, want %v", g.body, want)
	}
	for k, v := range want {
		if g.body[k] != v {
			t.Fatalf("body[%s] = %v, want %v (body %v)", k, g.body[k], v, g.body)
		}
	}
	waitFor(t, "delivered counted", func() bool { return w.Delivered() == 1 })
	if calls.Load() != 2 || w.Failed() != 0 || w.Dropped() != 0 {
		t.Fatalf("calls %d failed %d dropped %d, want 2 0 0", calls.Load(), w.Failed(), w.Dropped())
	}
}

// Tries are bounded; a 4xx is not retried.
func TestWebhookGivesUp(t *testing.T) {
	var calls atomic.Int64
	status := atomic.Int64{}
	status.Store(http.StatusInternalServerError)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	w, err := alert.NewWebhook(alert.WebhookConfig{URL: srv.URL, Attempts: 3, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Notify(learned)
	waitFor(t, "failed after 3 tries", func() bool { return w.Failed() == 1 })
	if calls.Load() != 3 {
		t.Fatalf("tries = %d, want 3", calls.Load())
	}
	status.Store(http.StatusBadRequest)
	w.Notify(learned)
	waitFor(t, "failed at once on 400", func() bool { return w.Failed() == 2 })
	if calls.Load() != 4 {
		t.Fatalf("tries = %d, want 4 (a 400 is not retried)", calls.Load())
	}
}

// A webhook that hangs never blocks Notify: the queue fills, the rest are
// dropped and counted; Close cancels the hanging try.
func TestWebhookNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	w, err := alert.NewWebhook(alert.WebhookConfig{URL: srv.URL, QueueSize: 2, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for range 100 {
			w.Notify(learned)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Notify blocked on a hanging webhook")
	}
	// One in flight, at most 2 queued: at least 97 dropped.
	if d := w.Dropped(); d < 97 {
		t.Fatalf("dropped = %d, want at least 97", d)
	}
	w.Close()
	if w.Dropped()+w.Failed() != 100 || w.Delivered() != 0 {
		t.Fatalf("after Close: dropped %d failed %d delivered %d, want all 100 accounted for", w.Dropped(), w.Failed(), w.Delivered())
	}
}

func TestWebhookConfig(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "/relative", "http://"} {
		if _, err := alert.NewWebhook(alert.WebhookConfig{URL: u}); err == nil {
			t.Fatalf("URL %q accepted", u)
		}
	}
}
