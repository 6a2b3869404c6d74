package stt

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func newAssemblyAI(t *testing.T, v *vendor) *AssemblyAI {
	t.Helper()
	a, err := NewAssemblyAI(v.config())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const assemblyAIID = "6rlr37h4c1-0b6a-4d4e-8f5e-2b1c6c3f7a10"

func assemblyAIURLRequest() Request {
	return Request{
		IdempotencyKey: "t1:call-42:9f86d0",
		AudioURL:       "https://recordings.example.com/t1/call-42.wav?X-Amz-Signature=SECRETSIG",
		Header:         http.Header{"X-Admitted-At": {"2026-03-01T12:00:00Z"}},
	}
}

func TestAssemblyAISubmitResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		outcome    Outcome
		class      string
		status     int
		providerID string
		retryAfter *string
		message    string
	}{
		{name: "queued", handler: answer(200, fixture(t, "assemblyai", "queued.json")),
			outcome: OutcomePending, class: ClassAccepted, status: 200, providerID: assemblyAIID},
		{name: "400 bad request", handler: answer(400, fixture(t, "assemblyai", "error_bad_request.json")),
			outcome: OutcomePermanent, class: ClassInvalidRequest, status: 400, message: "not available in this language"},
		{name: "400 negative balance", handler: answer(400, fixture(t, "assemblyai", "error_negative_balance.json")),
			outcome: OutcomeQuotaExhausted, class: ClassQuotaExhausted, status: 400, message: "balance is negative"},
		{name: "401", handler: answer(401, fixture(t, "assemblyai", "error_unauthorized.json")),
			outcome: OutcomePermanent, class: ClassUnauthorized, status: 401, message: "API token missing/invalid"},
		{name: "429 with Retry-After", handler: answer(429, fixture(t, "assemblyai", "error_rate_limited.json"), "Retry-After", "60"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("60")},
		{name: "429 without Retry-After", handler: answer(429, fixture(t, "assemblyai", "error_rate_limited.json")),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429},
		{name: "429 detail shape", handler: answer(429, []byte(`{"status": 429, "title": "Too Many Requests", "detail": "rate limit exceeded"}`)),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, message: "rate limit exceeded"},
		{name: "500", handler: answer(500, fixture(t, "assemblyai", "error_server.json")),
			outcome: OutcomeTransient, class: ClassServerError, status: 500, message: "developers have been alerted"},
		{name: "503 with Retry-After", handler: answer(503, nil, "Retry-After", "1"),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp("1")},
		{name: "200 not JSON", handler: answer(200, []byte("<html></html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 unknown status", handler: answer(200, []byte(`{"id": "x", "status": "paused"}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newAssemblyAI(t, v).Submit(t.Context(), assemblyAIURLRequest())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if got.ProviderID != tt.providerID || !eqp(got.RetryAfter, tt.retryAfter) {
				t.Errorf("ProviderID %q RetryAfter %s, want %q %s", got.ProviderID, show(got.RetryAfter), tt.providerID, show(tt.retryAfter))
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

func TestAssemblyAIPoll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		outcome Outcome
		class   string
		status  int
		message string
	}{
		{"queued", answer(200, fixture(t, "assemblyai", "queued.json")), OutcomePending, ClassQueued, 200, ""},
		{"processing", answer(200, fixture(t, "assemblyai", "processing.json")), OutcomePending, ClassProcessing, 200, ""},
		{"completed", answer(200, fixture(t, "assemblyai", "completed.json")), OutcomeCompleted, ClassCompleted, 200, ""},
		{"error", answer(200, fixture(t, "assemblyai", "error_transcript.json")), OutcomePermanent, ClassTranscriptionFailed, 200, "Download error, unable to download https://recordings.example.com/t1/call-44.wav?[redacted]"},
		{"400 transcript id not found", answer(400, fixture(t, "assemblyai", "error_transcript_not_found.json")), OutcomeNotFound, ClassNotFound, 400, "transcript id not found"},
		{"404", answer(404, []byte(`{"error": "Not found"}`)), OutcomeNotFound, ClassNotFound, 404, ""},
		{"429", answer(429, fixture(t, "assemblyai", "error_rate_limited.json")), OutcomeThrottled, ClassRateLimited, 429, ""},
		{"500", answer(500, fixture(t, "assemblyai", "error_server.json")), OutcomeTransient, ClassServerError, 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newAssemblyAI(t, v).Poll(t.Context(), assemblyAIID)
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			assertNoSecrets(t, "Message", got.Message)
			r := v.only(t)
			if r.Method != http.MethodGet || r.Path != "/v2/transcript/"+assemblyAIID || r.Header.Get("Authorization") != testKey {
				t.Errorf("request %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
			}
		})
	}
}

// TestAssemblyAITranscript: milliseconds become seconds, en_us becomes en.
func TestAssemblyAITranscript(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "assemblyai", "completed.json")))
	got, err := newAssemblyAI(t, v).Poll(t.Context(), assemblyAIID)
	mustNoErr(t, err)
	tr := got.Transcript
	if tr == nil {
		t.Fatalf("no transcript: %+v", got)
	}
	if tr.Text != "Smoke from hundreds of wildfires in Canada." || tr.Language != "en" || tr.Confidence != 0.9578546495327116 ||
		tr.DurationSeconds != 281 || tr.ProviderID != assemblyAIID || got.ProviderID != assemblyAIID {
		t.Errorf("transcript = %+v", tr)
	}
	want := []Segment{
		{Start: 0.25, End: 0.65, Text: "Smoke", Confidence: 0.73033},
		{Start: 0.73, End: 1.022, Text: "from", Confidence: 0.99996},
	}
	if len(tr.Segments) != 7 || tr.Segments[0] != want[0] || tr.Segments[1] != want[1] {
		t.Errorf("Segments = %+v", tr.Segments)
	}
	if last := tr.Segments[6]; last.Start != 2.548 || last.End != 3.13 {
		t.Errorf("last word %+v", last)
	}
}

// TestAssemblyAIRequest: an http(s) URL is submitted directly, with
// language detection unless a language is given.
func TestAssemblyAIRequest(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		language, model string
		want            map[string]any
	}{
		{"", "", map[string]any{"audio_url": assemblyAIURLRequest().AudioURL, "language_detection": true}},
		{"de", "universal", map[string]any{"audio_url": assemblyAIURLRequest().AudioURL, "language_code": "de", "speech_model": "universal"}},
	} {
		v := newVendor(t, answer(200, fixture(t, "assemblyai", "queued.json")))
		cfg := v.config()
		cfg.Model = tt.model
		a, err := NewAssemblyAI(cfg)
		mustNoErr(t, err)
		req := assemblyAIURLRequest()
		req.Language = tt.language
		_, err = a.Submit(t.Context(), req)
		mustNoErr(t, err)
		got := v.only(t)
		if got.Method != http.MethodPost || got.Path != "/v2/transcript" || got.Header.Get("Authorization") != testKey ||
			got.Header.Get("Content-Type") != "application/json" || got.Header.Get("X-Admitted-At") == "" {
			t.Errorf("request %s %s headers %v", got.Method, got.Path, got.Header)
		}
		var body map[string]any
		if err := json.Unmarshal(got.Body, &body); err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, body) != mustJSON(t, tt.want) {
			t.Errorf("body %s, want %s", mustJSON(t, body), mustJSON(t, tt.want))
		}
	}
}

// TestAssemblyAIUploadThenSubmit: local audio is uploaded raw first and
// the upload_url submitted.
func TestAssemblyAIUploadThenSubmit(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "assemblyai", "upload.json")), answer(200, fixture(t, "assemblyai", "queued.json")))
	open, closed := audioFrom(wavBytes)
	req := Request{AudioURL: "file:///var/recordings/t1/call-42.wav", OpenAudio: open, AudioBytes: int64(len(wavBytes)), Header: http.Header{"X-Admitted-At": {"now"}}}
	got, err := newAssemblyAI(t, v).Submit(t.Context(), req)
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomePending, ClassAccepted, 200)
	if got.ProviderID != assemblyAIID {
		t.Errorf("ProviderID %q", got.ProviderID)
	}
	reqs := v.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want upload then submit", len(reqs))
	}
	up, sub := reqs[0], reqs[1]
	if up.Method != http.MethodPost || up.Path != "/v2/upload" || up.Header.Get("Content-Type") != "application/octet-stream" ||
		up.Header.Get("Authorization") != testKey || !bytes.Equal(up.Body, wavBytes) || up.ContentLength != int64(len(wavBytes)) {
		t.Errorf("upload %s %s type %q, %d bytes, length %d", up.Method, up.Path, up.Header.Get("Content-Type"), len(up.Body), up.ContentLength)
	}
	var body map[string]any
	if err := json.Unmarshal(sub.Body, &body); err != nil {
		t.Fatal(err)
	}
	if sub.Path != "/v2/transcript" || body["audio_url"] != "https://cdn.assemblyai.com/upload/f756988d-47e2-4ca3-96ce-04bb168f8f2a" {
		t.Errorf("submit %s body %s", sub.Path, sub.Body)
	}
	if !closed() {
		t.Error("audio left open")
	}
}

// TestAssemblyAIUploadFailures: a refused upload ends the Submit with the
// upload's answer.
func TestAssemblyAIUploadFailures(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		outcome Outcome
		class   string
		status  int
	}{
		{"429", answer(429, fixture(t, "assemblyai", "error_rate_limited.json"), "Retry-After", "30"), OutcomeThrottled, ClassRateLimited, 429},
		{"401", answer(401, fixture(t, "assemblyai", "error_unauthorized.json")), OutcomePermanent, ClassUnauthorized, 401},
		{"no upload_url", answer(200, []byte(`{}`)), OutcomeTransient, ClassBadResponse, 200},
		{"reset", resetConnection(t), OutcomeTransient, ClassNetwork, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			open, _ := audioFrom(wavBytes)
			got, err := newAssemblyAI(t, v).Submit(t.Context(), Request{AudioURL: "file:///x.wav", OpenAudio: open})
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if n := len(v.requests()); n != 1 {
				t.Errorf("%d requests: the submit must not follow a failed upload", n)
			}
		})
	}
}

func TestAssemblyAIMisuse(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "assemblyai", "upload.json")), answer(200, fixture(t, "assemblyai", "queued.json")))
	a := newAssemblyAI(t, v)
	if _, err := a.Submit(t.Context(), Request{AudioURL: "file:///x.wav"}); !errors.Is(err, ErrNoAudio) {
		t.Errorf("local audio without OpenAudio: %v", err)
	}
	if _, err := a.Submit(t.Context(), Request{AudioURL: "file:///x.wav", OpenAudio: failingAudio(nil, errDisk)}); !errors.Is(err, ErrAudioUnreadable) || !errors.Is(err, errDisk) {
		t.Errorf("unreadable audio: %v", err)
	}
	if _, err := a.Poll(t.Context(), ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Poll(\"\"): %v", err)
	}
	if _, err := a.Reconcile(t.Context(), "k"); !errors.Is(err, ErrCannotReconcile) {
		t.Errorf("Reconcile: %v", err)
	}
	if a.Name() != KindAssemblyAI || a.Capabilities() != (Capabilities{Async: true}) {
		t.Errorf("Name %q Capabilities %+v", a.Name(), a.Capabilities())
	}
}
