package stt_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// batchItems writes n distinct small WAV files and returns them as batch
// items (business-key-like keys, file:// URLs).
func batchItems(t *testing.T, n int) []stt.Request {
	t.Helper()
	base, err := os.ReadFile(filepath.Join("..", "..", "testdata", "recordings", "northline", "call-1001.wav"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := make([]stt.Request, n)
	for i := range out {
		data := append([]byte(nil), base...)
		data[len(data)-1] ^= byte(i + 1) // another digest, the same header
		data[len(data)-2] ^= byte(i >> 8)
		path := filepath.Join(dir, fmt.Sprintf("call-%04d.wav", i))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		digest := hex.EncodeToString(sum[:])
		out[i] = stt.Request{IdempotencyKey: fmt.Sprintf("t1:call-%04d:%s", i, digest), AudioURL: "file://" + path, AudioSHA256: digest, Language: "en"}
	}
	return out
}

func newSimGeneric(t *testing.T, cfg sttsim.Config) (*stt.GenericHTTP, *sttsim.Server) {
	t.Helper()
	cfg.APIKeys = []string{"batch-key"}
	sim, err := sttsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	g, err := stt.NewGenericHTTP(stt.Config{BaseURL: srv.URL, APIKey: "batch-key"})
	if err != nil {
		t.Fatal(err)
	}
	return g, sim
}

// A manifest is accepted as one request, polled to its end, and every item
// comes back with its transcript; the same manifest key sent again is the
// same batch (a client that crashed before recording the id), and no item
// is transcribed twice.
func TestGenericBatchSubmitPollAndReplay(t *testing.T) {
	t.Parallel()
	g, sim := newSimGeneric(t, sttsim.Config{})
	if !g.Capabilities().Batch {
		t.Fatal("generic-http should say it sends manifests")
	}
	ctx := context.Background()
	items := batchItems(t, 12)
	req := stt.BatchRequest{ManifestKey: "manifest:t1:generic-http:general:1", Items: items, RequestID: "m1-1"}
	first, err := g.SubmitBatch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.ProviderID == "" || first.HTTPStatus != http.StatusAccepted || len(first.Items) != len(items) {
		t.Fatalf("submit: %+v", first.Response)
	}
	again, err := g.SubmitBatch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderID != first.ProviderID {
		t.Fatalf("the manifest key sent again made batch %s, want %s", again.ProviderID, first.ProviderID)
	}
	polled, err := g.PollBatch(ctx, first.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if polled.Outcome != stt.OutcomeCompleted || len(polled.Items) != len(items) {
		t.Fatalf("poll: %+v with %d items", polled.Response, len(polled.Items))
	}
	for i, it := range polled.Items {
		if it.IdempotencyKey != items[i].IdempotencyKey || it.Response.Outcome != stt.OutcomeCompleted ||
			it.Response.Transcript == nil || it.Response.Transcript.Text == "" {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	st := sim.Stats()
	if st.Batches != 2 || st.Replays != 1 || st.Accepted != len(items) {
		t.Fatalf("the simulator saw %d batches, %d replays, %d accepted; want 2, 1, %d", st.Batches, st.Replays, st.Accepted, len(items))
	}
	for k, n := range st.Transcriptions {
		if n != 1 {
			t.Fatalf("%s transcribed %d times", k, n)
		}
	}
}

// A manifest that ends partly done: completed items carry transcripts,
// failed ones say whether they are worth sending again, lost ones are
// missing; the three add up to what was sent, and a second manifest of
// the failed and lost items alone is transcribed anew.
func TestGenericBatchPartialCompletion(t *testing.T) {
	t.Parallel()
	g, sim := newSimGeneric(t, sttsim.Config{BatchItemFailShare: 0.2, BatchItemLoseShare: 0.1, Rand: rand.New(rand.NewPCG(3, 4))})
	ctx := context.Background()
	items := batchItems(t, 100)
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = it.IdempotencyKey
	}
	res, err := g.SubmitBatch(ctx, stt.BatchRequest{ManifestKey: "m-partial", Items: items})
	if err != nil {
		t.Fatal(err)
	}
	res, err = g.PollBatch(ctx, res.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	var done, failed int
	retry := map[string]bool{}
	for _, it := range res.Items {
		switch it.Response.Outcome {
		case stt.OutcomeCompleted:
			done++
		case stt.OutcomeTransient:
			failed++
			retry[it.IdempotencyKey] = true
			if it.Response.Class != stt.ClassServerError || it.Response.Message == "" {
				t.Fatalf("failed item %+v", it.Response)
			}
		default:
			t.Fatalf("item %s: %+v", it.IdempotencyKey, it.Response)
		}
	}
	lost := res.Missing(keys)
	for _, k := range lost {
		retry[k] = true
	}
	st := sim.Stats()
	if done+failed+len(lost) != len(items) || failed != st.BatchItemsFailed || len(lost) != st.BatchItemsLost || failed == 0 || len(lost) == 0 {
		t.Fatalf("%d completed, %d failed, %d lost of %d (the simulator: %d failed, %d lost)", done, failed, len(lost), len(items), st.BatchItemsFailed, st.BatchItemsLost)
	}
	t.Logf("%d completed, %d failed, %d lost", done, failed, len(lost))

	var again []stt.Request
	for _, it := range items {
		if retry[it.IdempotencyKey] {
			again = append(again, it)
		}
	}
	res2, err := g.SubmitBatch(ctx, stt.BatchRequest{ManifestKey: "m-partial-2", Items: again})
	if err != nil {
		t.Fatal(err)
	}
	if got := sim.Stats().Accepted; got != len(items)+len(again) {
		t.Fatalf("accepted %d transcriptions after the resubmission, want %d: the failed and lost items anew", got, len(items)+len(again))
	}
	if len(res2.Items)+len(res2.Missing(keysOf(again))) != len(again) {
		t.Fatalf("resubmission lists %d items of %d", len(res2.Items), len(again))
	}
}

func keysOf(rs []stt.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.IdempotencyKey
	}
	return out
}

// A server without batches answers 404: ErrBatchUnsupported. Other
// failures are Responses, as for single requests, and nothing of the
// audio URLs leaks into them.
func TestGenericBatchUnsupportedAndFailures(t *testing.T) {
	t.Parallel()
	items := []stt.Request{{IdempotencyKey: "k1", AudioURL: "https://store.example/a.wav?sig=SECRETSIG", AudioSHA256: strings.Repeat("a", 64)}}
	cases := []struct {
		name    string
		status  int
		body    string
		header  string
		err     error
		outcome stt.Outcome
	}{
		{"404 no batches", 404, `{"error":{"type":"not_found","message":"no route"}}`, "", stt.ErrBatchUnsupported, stt.OutcomePermanent},
		{"429 with Retry-After", 429, `{"error":{"type":"rate_limited","message":"slow down"}}`, "7", nil, stt.OutcomeThrottled},
		{"500", 500, `oops https://store.example/a.wav?sig=SECRETSIG`, "", nil, stt.OutcomeTransient},
		{"202 garbage", 202, `{"id":`, "", nil, stt.OutcomeTransient},
		{"202 item without key", 202, `{"id":"b1","status":"processing","items":[{"status":"queued"}]}`, "", nil, stt.OutcomeTransient},
		{"202 unknown status", 202, `{"id":"b1","status":"exploded","items":[]}`, "", nil, stt.OutcomeTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/batches" || r.Header.Get("Idempotency-Key") != "mk" {
					http.Error(w, "unexpected request", http.StatusTeapot)
					return
				}
				if c.header != "" {
					w.Header().Set("Retry-After", c.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			g, err := stt.NewGenericHTTP(stt.Config{BaseURL: srv.URL, APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := g.SubmitBatch(context.Background(), stt.BatchRequest{ManifestKey: "mk", Items: items})
			if !errors.Is(err, c.err) { // errors.Is(nil, nil) holds
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if res.Outcome != c.outcome || res.HTTPStatus != c.status {
				t.Fatalf("%+v, want outcome %s status %d", res.Response, c.outcome, c.status)
			}
			if c.header != "" && (res.RetryAfter == nil || *res.RetryAfter != c.header) {
				t.Fatalf("Retry-After %v, want %q", res.RetryAfter, c.header)
			}
			if strings.Contains(res.Message, "SECRETSIG") {
				t.Fatalf("the audio URL's signature leaked: %q", res.Message)
			}
		})
	}
	g, _ := stt.NewGenericHTTP(stt.Config{BaseURL: "http://127.0.0.1:1", APIKey: "k"})
	for _, bad := range []stt.BatchRequest{{Items: items}, {ManifestKey: "mk"}, {ManifestKey: "mk", Items: []stt.Request{{IdempotencyKey: "k"}}}} {
		if _, err := g.SubmitBatch(context.Background(), bad); !errors.Is(err, stt.ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
}
