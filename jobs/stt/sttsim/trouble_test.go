package sttsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freshClient opens a new connection per request, so that a dropped
// connection is not silently retried by http.Transport.
func freshClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestDropAfterAccept(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		accepted []string
		b        *bundle
	)
	b = setup(t, Config{DropAfterAcceptShare: 1, OnAccept: func(key string) {
		mu.Lock()
		defer mu.Unlock()
		accepted = append(accepted, key)
		// Recorded before the answer: a reconcile now would find it.
		recorded := key
		if key == "manifest" {
			recorded = "in-batch"
		}
		if b.sim.Transcriptions(recorded) != 1 {
			t.Errorf("OnAccept(%s) before the transcription was recorded", key)
		}
	}})
	b.client = freshClient(t)

	body, _ := json.Marshal(remoteBody(1))
	req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/v1/transcriptions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	req.Header.Set("Idempotency-Key", "dropped")
	resp, err := b.client.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("got status %d, want a connection error", resp.StatusCode)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(err.Error(), "EOF") {
		t.Errorf("client error %v, want a reset (or an EOF when the reset races the request write)", err)
	}

	// The crashed client reconciles first and finds the transcription.
	resp2, data := b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=dropped", nil)
	wantStatus(t, resp2, data, http.StatusOK)
	tr := decode[wireTranscription](t, data)
	if tr.Status != statusCompleted {
		t.Errorf("reconciled %s", data)
	}
	// A resubmission is a replay: answered, not dropped, not transcribed again.
	resp2, data = b.submit("dropped", remoteBody(1))
	wantStatus(t, resp2, data, http.StatusOK)
	if again := decode[wireTranscription](t, data); again.ID != tr.ID {
		t.Errorf("resubmission answered %s, want %s", again.ID, tr.ID)
	}

	// Batches are dropped after acceptance too.
	unauth, err := b.client.Post(b.ts.URL+"/v1/batches", "application/json", strings.NewReader(`{"items": []}`))
	if err != nil {
		t.Fatalf("unauthenticated batch: %v", err) // 401: not accepted, not dropped
	}
	_ = unauth.Body.Close()
	breq, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/v1/batches",
		strings.NewReader(`{"items": [{"idempotency_key": "in-batch", "audio_url": "https://x.example/a.wav", "audio_sha256": "`+strings.Repeat("ab", 32)+`"}]}`))
	breq.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	breq.Header.Set("Idempotency-Key", "manifest")
	if resp, err := b.client.Do(breq); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("batch answered %d, want a dropped connection", resp.StatusCode)
	}
	resp2, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=in-batch", nil)
	wantStatus(t, resp2, data, http.StatusOK)

	st := b.sim.Stats()
	if st.Drops != 2 || st.Accepted != 2 || st.Transcriptions["dropped"] != 1 || st.Replays != 1 {
		t.Errorf("stats %+v", st)
	}
	if a := st.Arrivals[0]; !a.Dropped || a.Status != 0 {
		t.Errorf("arrival %+v, want dropped", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(accepted) != 2 || accepted[0] != "dropped" || accepted[1] != "manifest" {
		t.Errorf("OnAccept saw %v", accepted)
	}
}

// TestDropWithRecorderAborts checks the fallback when the connection
// cannot be hijacked: the handler aborts the way net/http expects.
func TestDropWithRecorderAborts(t *testing.T) {
	t.Parallel()
	sim, err := New(Config{DropAfterAcceptShare: 1, Clock: newClock()})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(remoteBody(1))
	req := httptest.NewRequest(http.MethodPost, "/v1/transcriptions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	req.Header.Set("Idempotency-Key", "k")
	defer func() {
		if r := recover(); r != http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared as net/http does
			t.Errorf("recovered %v, want http.ErrAbortHandler", r)
		}
	}()
	sim.Handler().ServeHTTP(httptest.NewRecorder(), req)
}

// TestLatencyHonoursCancellation checks that a client that gives up ends
// the server's wait: the handler returns at once and records nothing but
// the cancellation.
func TestLatencyHonoursCancellation(t *testing.T) {
	t.Parallel()
	sim, err := New(Config{Latency: time.Hour, LatencyJitter: time.Hour, Clock: newClock()})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(remoteBody(1))
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/transcriptions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sim.Handler().ServeHTTP(rec, req)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return after its request was cancelled")
	}
	st := sim.Stats()
	if st.Cancelled != 1 || st.Submissions != 0 || st.Accepted != 0 || rec.Body.Len() != 0 {
		t.Errorf("stats %+v, body %q", st, rec.Body.String())
	}

	// Over a real connection: the client's deadline ends the server's wait
	// (httptest.Server.Close, in cleanup, would otherwise block for an hour).
	b := setup(t, Config{Latency: time.Hour})
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req2, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.ts.URL+"/v1/transcriptions/tr_x", nil)
	req2.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	if resp, err := b.client.Do(req2); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			_ = resp.Body.Close()
		}
		t.Fatalf("got %v, want the client's deadline", err)
	}
	eventually(t, "the server to see the cancellation", func() bool { return b.sim.Stats().Cancelled == 1 })
	if st := b.sim.Stats(); st.Polls != 0 {
		t.Errorf("a cancelled request was counted: %+v", st)
	}
}

func TestLatencyDelaysAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 30 * time.Millisecond, LatencyJitter: 20 * time.Millisecond})
	start := time.Now()
	resp, data := b.submit("k", remoteBody(1))
	wantStatus(t, resp, data, http.StatusOK)
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("answered after %v, want at least the latency", took)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	sim, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sim.Serve(ctx, ln) }()

	client := freshClient(t)
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/v1/transcriptions?idempotency_key=k", nil)
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve returned %v after shutdown, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Error("still serving after shutdown")
	}
}

func TestListenAndServe(t *testing.T) {
	t.Parallel()
	sim, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.ListenAndServe(context.Background(), "127.0.0.1:-1"); err == nil {
		t.Error("a bad address was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sim.ListenAndServe(ctx, "127.0.0.1:0"); err != nil {
		t.Errorf("ListenAndServe with an ended context: %v", err)
	}
}

// TestConcurrentClients hammers one server from many goroutines, with
// asynchronous answers, polls and Stats, under -race: every key is
// transcribed once and answered with one id.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AsyncShare: 0.5, ProcessingTime: time.Second, APIKeys: []string{"k1", "k2"}})
	const workers, rounds, keys = 8, 25, 10
	var (
		mu  sync.Mutex
		ids = map[string]map[string]bool{}
		wg  sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				k := (w*rounds + r) % keys
				key := "key-" + string(rune('a'+k))
				body, _ := json.Marshal(remoteBody(byte(k)))
				req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/v1/transcriptions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer k"+string(rune('1'+w%2)))
				req.Header.Set("Idempotency-Key", key)
				resp, err := b.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var tr wireTranscription
				err = json.NewDecoder(resp.Body).Decode(&tr)
				_ = resp.Body.Close()
				if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted) {
					t.Errorf("status %d, %v", resp.StatusCode, err)
					return
				}
				mu.Lock()
				if ids[key] == nil {
					ids[key] = map[string]bool{}
				}
				ids[key][tr.ID] = true
				mu.Unlock()
				if r%5 == 0 {
					b.clock.Advance(100 * time.Millisecond)
					_ = b.sim.Stats()
					preq, _ := http.NewRequest(http.MethodGet, b.ts.URL+"/v1/transcriptions/"+tr.ID, nil)
					preq.Header.Set("Authorization", "Bearer k1")
					if presp, err := b.client.Do(preq); err == nil {
						_ = presp.Body.Close()
					}
				}
			}
		}()
	}
	wg.Wait()
	st := b.sim.Stats()
	if st.Accepted != keys || st.Submissions != workers*rounds || st.Replays != workers*rounds-keys {
		t.Errorf("accepted %d, submissions %d, replays %d", st.Accepted, st.Submissions, st.Replays)
	}
	for key, set := range ids {
		if len(set) != 1 || b.sim.Transcriptions(key) != 1 {
			t.Errorf("%s: ids %v, transcribed %d times", key, set, b.sim.Transcriptions(key))
		}
	}
}
