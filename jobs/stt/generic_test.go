package stt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/callscribe/callscribe/internal/vendorhttp/conntest"
)

// genericRequest is a submission as the worker makes it.
func genericRequest() Request {
	h := make(http.Header)
	h.Set("X-Admitted-At", "2026-03-01T12:00:00Z")
	h.Set("Authorization", "Bearer not-the-adapters") // must lose to the adapter's own
	return Request{
		IdempotencyKey: "t1:call-42:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		TenantID:       "t1",
		CallID:         "call-42",
		AudioSHA256:    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		AudioURL:       "https://recordings.example.com/t1/call-42.wav?X-Amz-Signature=SECRETSIG",
		RequestID:      "attempt-7",
		Header:         h,
	}
}

func newGeneric(t *testing.T, v *vendor) *GenericHTTP {
	t.Helper()
	g, err := NewGenericHTTP(v.config())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGenericSubmitResponseTable drives Submit through every row of the
// stt-http/v1 response table, and the edges around it.
func TestGenericSubmitResponseTable(t *testing.T) {
	t.Parallel()
	const fixdate = "Sun, 06 Nov 1994 08:49:37 GMT"
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		outcome    Outcome
		class      string
		status     int
		providerID string
		retryAfter *string
		pollAfter  *string
		message    string // a substring of Message
	}{
		{name: "200 completed", handler: answer(200, fixture(t, "generic", "completed.json")),
			outcome: OutcomeCompleted, class: ClassCompleted, status: 200, providerID: "tr_1"},
		{name: "200 failed", handler: answer(200, fixture(t, "generic", "failed.json")),
			outcome: OutcomePermanent, class: ClassTranscriptionFailed, status: 200, providerID: "tr_3", message: "could not decode audio"},
		{name: "200 queued", handler: answer(200, fixture(t, "generic", "queued.json")),
			outcome: OutcomePending, class: ClassAccepted, status: 200, providerID: "tr_2"},
		{name: "202 queued with Retry-After", handler: answer(202, fixture(t, "generic", "queued.json"), "Retry-After", "5"),
			outcome: OutcomePending, class: ClassAccepted, status: 202, providerID: "tr_2", pollAfter: strp("5")},
		{name: "202 processing without Retry-After", handler: answer(202, fixture(t, "generic", "processing.json")),
			outcome: OutcomePending, class: ClassAccepted, status: 202, providerID: "tr_2"},
		{name: "400 invalid_request", handler: answer(400, fixture(t, "generic", "error_invalid_request.json")),
			outcome: OutcomePermanent, class: ClassInvalidRequest, status: 400, message: "audio_url must be"},
		{name: "404 not_found", handler: answer(404, fixture(t, "generic", "error_not_found.json")),
			outcome: OutcomePermanent, class: ClassNotFound, status: 404},
		{name: "413 audio_too_large", handler: answer(413, fixture(t, "generic", "error_audio_too_large.json")),
			outcome: OutcomePermanent, class: ClassAudioTooLarge, status: 413},
		{name: "415 unsupported_media", handler: answer(415, fixture(t, "generic", "error_unsupported_media.json")),
			outcome: OutcomePermanent, class: ClassUnsupportedMedia, status: 415},
		{name: "422 idempotency_key_reused", handler: answer(422, fixture(t, "generic", "error_idempotency_key_reused.json")),
			outcome: OutcomePermanent, class: ClassIdempotencyKeyReused, status: 422, message: "different request body"},
		{name: "400 with a type the protocol lacks", handler: answer(400, fixture(t, "generic", "error_unknown_type.json")),
			outcome: OutcomePermanent, class: ClassInvalidRequest, status: 400},
		{name: "413 with a body that is not JSON", handler: answer(413, []byte("<html>too big</html>"), "Content-Type", "text/html"),
			outcome: OutcomePermanent, class: ClassAudioTooLarge, status: 413},
		{name: "401 unauthorized", handler: answer(401, fixture(t, "generic", "error_unauthorized.json")),
			outcome: OutcomePermanent, class: ClassUnauthorized, status: 401},
		{name: "403 forbidden", handler: answer(403, fixture(t, "generic", "error_forbidden.json")),
			outcome: OutcomePermanent, class: ClassForbidden, status: 403},
		{name: "429 delay-seconds", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "17"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("17"), message: "too many concurrent requests"},
		{name: "429 IMF-fixdate", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", fixdate),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp(fixdate)},
		{name: "429 RFC 850 date", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "Sunday, 06-Nov-94 08:49:37 GMT"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("Sunday, 06-Nov-94 08:49:37 GMT")},
		{name: "429 asctime date", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "Sun Nov  6 08:49:37 1994"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("Sun Nov  6 08:49:37 1994")},
		{name: "429 without Retry-After", handler: answer(429, fixture(t, "generic", "error_rate_limited.json")),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429},
		{name: "429 malformed Retry-After", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "soon-ish"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("soon-ish")},
		{name: "429 negative Retry-After", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "-5"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("-5")},
		{name: "429 empty Retry-After", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", ""),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("")},
		{name: "429 two Retry-After fields", handler: answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "10", "Retry-After", "20"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("10, 20")},
		{name: "429 with a body that is not JSON", handler: answer(429, []byte("slow down"), "Content-Type", "text/plain", "Retry-After", "3"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("3"), message: "slow down"},
		{name: "500", handler: answer(500, fixture(t, "generic", "error_server_error.json")),
			outcome: OutcomeTransient, class: ClassServerError, status: 500, message: "internal error"},
		{name: "502 with an HTML body", handler: answer(502, []byte("<html><body>Bad Gateway</body></html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassServerError, status: 502},
		{name: "504 with no body", handler: answer(504, nil),
			outcome: OutcomeTransient, class: ClassServerError, status: 504},
		{name: "503 with Retry-After", handler: answer(503, fixture(t, "generic", "error_unavailable.json"), "Retry-After", "30"),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp("30"), message: "restarting"},
		{name: "503 with an HTTP-date Retry-After", handler: answer(503, fixture(t, "generic", "error_unavailable.json"), "Retry-After", fixdate),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp(fixdate)},
		{name: "503 without Retry-After", handler: answer(503, fixture(t, "generic", "error_unavailable.json")),
			outcome: OutcomeTransient, class: ClassUnavailable, status: 503},
		{name: "200 not JSON", handler: answer(200, []byte("<html>OK</html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 empty", handler: answer(200, nil),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 JSON of the wrong shape", handler: answer(200, []byte(`{"id": 7, "status": ["completed"]}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 completed without text", handler: answer(200, []byte(`{"id": "tr_1", "status": "completed"}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 unknown status", handler: answer(200, fixture(t, "generic", "unknown_status.json")),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "202 without an id", handler: answer(202, []byte(`{"status": "queued"}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 202},
		{name: "418 a status the protocol lacks", handler: answer(418, []byte(`{"error": {"type": "teapot", "message": "short and stout"}}`)),
			outcome: OutcomeTransient, class: ClassUnexpectedStatus, status: 418},
		{name: "204 a success the protocol lacks", handler: answer(204, nil),
			outcome: OutcomeTransient, class: ClassUnexpectedStatus, status: 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newGeneric(t, v).Submit(t.Context(), genericRequest())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if got.ProviderID != tt.providerID {
				t.Errorf("ProviderID = %q, want %q", got.ProviderID, tt.providerID)
			}
			if !eqp(got.RetryAfter, tt.retryAfter) {
				t.Errorf("RetryAfter = %s, want %s", show(got.RetryAfter), show(tt.retryAfter))
			}
			if !eqp(got.PollAfter, tt.pollAfter) {
				t.Errorf("PollAfter = %s, want %s", show(got.PollAfter), show(tt.pollAfter))
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			if got.VendorDelay != nil || got.VendorDelayHeader != "" {
				t.Errorf("generic-http has no vendor delay headers, got %v %q", got.VendorDelay, got.VendorDelayHeader)
			}
			if (got.Outcome == OutcomeCompleted) != (got.Transcript != nil) {
				t.Errorf("Transcript = %v with outcome %q", got.Transcript, got.Outcome)
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

// TestGenericTranscript checks that a completed transcription is mapped
// field by field.
func TestGenericTranscript(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "generic", "completed.json")))
	got, err := newGeneric(t, v).Submit(t.Context(), genericRequest())
	mustNoErr(t, err)
	tr := got.Transcript
	if tr == nil {
		t.Fatalf("no transcript: %+v", got)
	}
	if tr.Text != "Hi, this is Dana from Northline Freight. I'll send the rate sheet by Friday." {
		t.Errorf("Text = %q", tr.Text)
	}
	if tr.Language != "en" { // "en-US" normalised
		t.Errorf("Language = %q, want en", tr.Language)
	}
	if tr.Confidence != 0.94 || tr.DurationSeconds != 41.2 || tr.ProviderID != "tr_1" {
		t.Errorf("Confidence %v, DurationSeconds %v, ProviderID %q", tr.Confidence, tr.DurationSeconds, tr.ProviderID)
	}
	want := []Segment{
		{Start: 0, End: 2.4, Text: "Hi, this is Dana", Confidence: 0.97},
		{Start: 2.4, End: 4.1, Text: "from Northline Freight.", Confidence: 0.91},
		{Start: 4.6, End: 7.9, Text: "I'll send the rate sheet by Friday.", Confidence: -1}, // null confidence
	}
	if len(tr.Segments) != len(want) {
		t.Fatalf("Segments = %+v", tr.Segments)
	}
	for i := range want {
		if tr.Segments[i] != want[i] {
			t.Errorf("Segments[%d] = %+v, want %+v", i, tr.Segments[i], want[i])
		}
	}
}

// TestGenericTranscriptDefaults: absent confidence is -1, absent language
// falls back to the requested one, an out-of-range confidence is clamped.
func TestGenericTranscriptDefaults(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, []byte(`{"id": "tr_5", "status": "completed", "text": "", "confidence": 1.7, "segments": []}`)),
		answer(200, []byte(`{"id": "tr_6", "status": "completed", "text": "ja"}`)))
	g := newGeneric(t, v)
	req := genericRequest()
	req.Language = "DE"
	got, err := g.Submit(t.Context(), req)
	mustNoErr(t, err)
	if tr := got.Transcript; tr == nil || tr.Confidence != 1 || tr.Language != "de" || tr.Text != "" {
		t.Errorf("transcript = %+v, want confidence clamped to 1, language de, empty text", tr)
	}
	got, err = g.Submit(t.Context(), req)
	mustNoErr(t, err)
	if tr := got.Transcript; tr == nil || tr.Confidence != -1 {
		t.Errorf("transcript = %+v, want confidence -1", tr)
	}
}

// TestGenericSubmitRequest checks what goes on the wire.
func TestGenericSubmitRequest(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(202, fixture(t, "generic", "queued.json")))
	g := newGeneric(t, v)
	req := genericRequest()
	_, err := g.Submit(t.Context(), req)
	mustNoErr(t, err)
	got := v.only(t)

	if got.Method != http.MethodPost || got.Path != "/v1/transcriptions" || got.RawQuery != "" {
		t.Errorf("request line = %s %s?%s", got.Method, got.Path, got.RawQuery)
	}
	for name, want := range map[string]string{
		"Authorization":   "Bearer " + testKey,
		"Idempotency-Key": req.IdempotencyKey,
		"X-Request-Id":    "attempt-7",
		"X-Admitted-At":   "2026-03-01T12:00:00Z",
		"Content-Type":    "application/json; charset=utf-8",
	} {
		if vs := got.Header.Values(name); len(vs) != 1 || vs[0] != want {
			t.Errorf("header %s = %q, want [%q]", name, vs, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatalf("body %s: %v", got.Body, err)
	}
	want := map[string]any{
		"audio_url":    req.AudioURL,
		"audio_sha256": req.AudioSHA256,
		"model":        GenericHTTPModelDefault,
		"tenant_id":    "t1",
		"metadata":     map[string]any{"call_id": "call-42"},
	}
	if len(body) != len(want) { // language omitted when empty
		t.Errorf("body has fields %v, want exactly %v", body, want)
	}
	for k, w := range want {
		if b, _ := json.Marshal(body[k]); string(b) != mustJSON(t, w) {
			t.Errorf("body.%s = %s, want %s", k, b, mustJSON(t, w))
		}
	}

	// A request's model and language override the defaults.
	v2 := newVendor(t, answer(202, fixture(t, "generic", "queued.json")))
	req.Model, req.Language = "telephony", "en"
	_, err = newGeneric(t, v2).Submit(t.Context(), req)
	mustNoErr(t, err)
	body = nil
	if err := json.Unmarshal(v2.only(t).Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["model"] != "telephony" || body["language"] != "en" {
		t.Errorf("body = %v, want model telephony and language en", body)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGenericPoll covers GET /v1/transcriptions/{id}: a transcription in
// any status, 404 for an unknown id, throttling as on submit.
func TestGenericPoll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		outcome    Outcome
		class      string
		status     int
		retryAfter *string
		pollAfter  *string
	}{
		{"completed", answer(200, fixture(t, "generic", "completed.json")), OutcomeCompleted, ClassCompleted, 200, nil, nil},
		{"queued", answer(200, fixture(t, "generic", "queued.json"), "Retry-After", "3"), OutcomePending, ClassQueued, 200, nil, strp("3")},
		{"processing", answer(200, fixture(t, "generic", "processing.json")), OutcomePending, ClassProcessing, 200, nil, nil},
		{"failed", answer(200, fixture(t, "generic", "failed.json")), OutcomePermanent, ClassTranscriptionFailed, 200, nil, nil},
		{"404 unknown id", answer(404, fixture(t, "generic", "error_not_found.json")), OutcomeNotFound, ClassNotFound, 404, nil, nil},
		{"429", answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "9"), OutcomeThrottled, ClassRateLimited, 429, strp("9"), nil},
		{"503 with Retry-After", answer(503, fixture(t, "generic", "error_unavailable.json"), "Retry-After", "4"), OutcomeThrottled, ClassUnavailable, 503, strp("4"), nil},
		{"503 without Retry-After", answer(503, fixture(t, "generic", "error_unavailable.json")), OutcomeTransient, ClassUnavailable, 503, nil, nil},
		{"401", answer(401, fixture(t, "generic", "error_unauthorized.json")), OutcomePermanent, ClassUnauthorized, 401, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newGeneric(t, v).Poll(t.Context(), "tr_2")
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if !eqp(got.RetryAfter, tt.retryAfter) || !eqp(got.PollAfter, tt.pollAfter) {
				t.Errorf("RetryAfter %s PollAfter %s, want %s %s", show(got.RetryAfter), show(got.PollAfter), show(tt.retryAfter), show(tt.pollAfter))
			}
			r := v.only(t)
			if r.Method != http.MethodGet || r.Path != "/v1/transcriptions/tr_2" || r.Header.Get("Authorization") != "Bearer "+testKey {
				t.Errorf("request = %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
			}
		})
	}
}

// TestGenericPollEscapesID: an id is one path segment, whatever it holds.
func TestGenericPollEscapesID(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "generic", "processing.json")))
	_, err := newGeneric(t, v).Poll(t.Context(), "tr/2 ?x")
	mustNoErr(t, err)
	if got := v.only(t).Path; got != "/v1/transcriptions/tr%2F2%20%3Fx" {
		t.Errorf("path = %s", got)
	}
}

// TestGenericReconcile covers GET /v1/transcriptions?idempotency_key=.
func TestGenericReconcile(t *testing.T) {
	t.Parallel()
	key := genericRequest().IdempotencyKey
	tests := []struct {
		name    string
		handler http.HandlerFunc
		outcome Outcome
		class   string
		status  int
		id      string
	}{
		{"completed", answer(200, fixture(t, "generic", "completed.json")), OutcomeCompleted, ClassCompleted, 200, "tr_1"},
		{"queued", answer(200, fixture(t, "generic", "queued.json")), OutcomePending, ClassQueued, 200, "tr_2"},
		{"processing", answer(200, fixture(t, "generic", "processing.json")), OutcomePending, ClassProcessing, 200, "tr_2"},
		{"failed", answer(200, fixture(t, "generic", "failed.json")), OutcomePermanent, ClassTranscriptionFailed, 200, "tr_3"},
		{"404 never seen", answer(404, fixture(t, "generic", "error_not_found.json")), OutcomeNotFound, ClassNotFound, 404, ""},
		{"429", answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", "2"), OutcomeThrottled, ClassRateLimited, 429, ""},
		{"503", answer(503, fixture(t, "generic", "error_unavailable.json"), "Retry-After", "2"), OutcomeThrottled, ClassUnavailable, 503, ""},
		{"500", answer(500, nil), OutcomeTransient, ClassServerError, 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newGeneric(t, v).Reconcile(t.Context(), key)
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if got.ProviderID != tt.id {
				t.Errorf("ProviderID = %q, want %q", got.ProviderID, tt.id)
			}
			r := v.only(t)
			if r.Method != http.MethodGet || r.Path != "/v1/transcriptions" || r.RawQuery != "idempotency_key="+url.QueryEscape(key) {
				t.Errorf("request = %s %s?%s", r.Method, r.Path, r.RawQuery)
			}
		})
	}
}

// TestGenericNetworkFailures covers the protocol's last rows: a reset
// connection, a timeout; and what the caller's context does.
func TestGenericNetworkFailures(t *testing.T) {
	t.Parallel()

	t.Run("reset before answering", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t, resetConnection(t))
		got, err := newGeneric(t, v).Submit(t.Context(), genericRequest())
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassNetwork, 0)
		if got.Message == "" {
			t.Error("no Message for a network failure")
		}
		assertNoSecrets(t, "Message", got.Message)
	})
	t.Run("reset in the middle of the body", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t, resetMidBody(t))
		got, err := newGeneric(t, v).Poll(t.Context(), "tr_1")
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassNetwork, 200)
	})
	t.Run("adapter timeout", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t)
		v.handlers = []http.HandlerFunc{v.block}
		cfg := v.config()
		cfg.Timeout = shortTimeout
		g, err := NewGenericHTTP(cfg)
		mustNoErr(t, err)
		got, err := g.Submit(t.Context(), genericRequest())
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassTimeout, 0)
	})
	t.Run("client timeout", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t)
		v.handlers = []http.HandlerFunc{v.block}
		client := v.srv.Client()
		client.Timeout = shortTimeout
		g, err := NewGenericHTTP(Config{BaseURL: v.srv.URL, APIKey: testKey, HTTPClient: client})
		mustNoErr(t, err)
		got, err := g.Reconcile(t.Context(), "t1:call-42:abc")
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassTimeout, 0)
	})
	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t)
		v.handlers = []http.HandlerFunc{v.block}
		ctx, cancel := context.WithTimeout(t.Context(), shortTimeout)
		defer cancel()
		got, err := newGeneric(t, v).Poll(ctx, "tr_1")
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassTimeout, 0)
	})
	t.Run("caller cancels", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		v := newVendor(t)
		v.handlers = []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			cancel() // the caller gives up while the vendor works
			v.block(w, r)
		}}
		got, err := newGeneric(t, v).Submit(ctx, genericRequest())
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassCanceled, 0)
	})
	t.Run("nothing listening", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t, answer(200, nil))
		cfg := v.config()
		v.srv.Close() // the address now refuses connections
		g, err := NewGenericHTTP(cfg)
		mustNoErr(t, err)
		got, err := g.Submit(t.Context(), genericRequest())
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeTransient, ClassNetwork, 0)
	})
}

// TestGenericResponseTooLarge: a success body over the limit is transient;
// an error body over the limit still reports the status's meaning.
func TestGenericResponseTooLarge(t *testing.T) {
	t.Parallel()
	big := []byte(`{"id": "tr_1", "status": "completed", "text": "` + strings.Repeat("la ", 400) + `"}`)
	v := newVendor(t, answer(200, big), answer(429, big, "Retry-After", "7"))
	cfg := v.config()
	cfg.MaxResponseBytes = 512
	g, err := NewGenericHTTP(cfg)
	mustNoErr(t, err)
	got, err := g.Submit(t.Context(), genericRequest())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeTransient, ClassResponseTooLarge, 200)
	got, err = g.Submit(t.Context(), genericRequest())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeThrottled, ClassRateLimited, 429)
	if !eqp(got.RetryAfter, strp("7")) {
		t.Errorf("RetryAfter = %s", show(got.RetryAfter))
	}
}

// TestGenericMisuse: the only errors are the caller's.
func TestGenericMisuse(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(500, nil))
	g := newGeneric(t, v)
	req := genericRequest()
	req.IdempotencyKey = ""
	if _, err := g.Submit(t.Context(), req); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Submit without a key: %v, want ErrInvalidArgument", err)
	}
	req = genericRequest()
	req.AudioURL = ""
	if _, err := g.Submit(t.Context(), req); !errors.Is(err, ErrNoAudio) {
		t.Errorf("Submit without audio: %v, want ErrNoAudio", err)
	}
	if _, err := g.Poll(t.Context(), ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Poll(\"\"): %v", err)
	}
	if _, err := g.Reconcile(t.Context(), ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Reconcile(\"\"): %v", err)
	}
	if n := len(v.requests()); n != 0 {
		t.Errorf("misuse reached the vendor %d times", n)
	}
	if g.Name() != KindGenericHTTP || g.Capabilities() != (Capabilities{Async: true, Reconcile: true, Batch: true}) {
		t.Errorf("Name %q Capabilities %+v", g.Name(), g.Capabilities())
	}
}

// TestGenericConfidenceIsFinite guards the JSON decoder's edge: numbers too
// large for a float64 are a bad response, not an Inf confidence.
func TestGenericConfidenceIsFinite(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, []byte(`{"id": "tr_1", "status": "completed", "text": "x", "confidence": 1e999}`)))
	got, err := newGeneric(t, v).Submit(t.Context(), genericRequest())
	mustNoErr(t, err)
	if got.Transcript != nil && (math.IsInf(got.Transcript.Confidence, 0) || math.IsNaN(got.Transcript.Confidence)) {
		t.Fatalf("confidence %v", got.Transcript.Confidence)
	}
	checkOutcome(t, got, OutcomeTransient, ClassBadResponse, 200)
}

// What a vendor sends is stored bounded and without control characters:
// a 60,000-byte Retry-After is cut to 256 bytes with a note, and an ESC
// sequence in a message loses its ESC.
func TestGenericBoundsWhatTheVendorSends(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(429, fixture(t, "generic", "error_rate_limited.json"), "Retry-After", strings.Repeat("1", 60000)))
	got, err := newGeneric(t, v).Submit(t.Context(), genericRequest())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeThrottled, ClassRateLimited, 429)
	want := strings.Repeat("1", 256) + "…(truncated, 60000 bytes)"
	if got.RetryAfter == nil || *got.RetryAfter != want {
		t.Errorf("RetryAfter = %.40s… (%d bytes), want 256 bytes and the truncation note", show(got.RetryAfter), len(show(got.RetryAfter)))
	}

	v = newVendor(t, answer(400, []byte(`{"error": {"type": "invalid_request", "message": "bad \u001b[2J\u001b]0;owned\u0007audio\u009b"}}`)))
	got, err = newGeneric(t, v).Submit(t.Context(), genericRequest())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomePermanent, ClassInvalidRequest, 400)
	if strings.ContainsFunc(got.Message, unicode.IsControl) || !strings.Contains(got.Message, "bad [2J]0;ownedaudio") {
		t.Errorf("Message = %q, want the text without its control characters", got.Message)
	}
}

// TestGenericKeepsConnectionsAlive: an adapter without an HTTPClient keeps
// a connection per concurrent submission for the next ones (a worker's
// transcription workers submit to one vendor at once);
// http.DefaultTransport would keep 2 and open 18 new ones for each wave of
// 20.
func TestGenericKeepsConnectionsAlive(t *testing.T) {
	t.Parallel()
	const width, waves = 20, 10
	srv := conntest.Start(t, width, answer(200, fixture(t, "generic", "completed.json")))
	g, err := NewGenericHTTP(Config{BaseURL: srv.URL, APIKey: testKey})
	mustNoErr(t, err)
	got := srv.Waves(t, waves, func(ctx context.Context, _ int) error {
		res, err := g.Submit(ctx, genericRequest())
		if err == nil && res.Outcome != OutcomeCompleted {
			err = fmt.Errorf("outcome %s (%s), want completed", res.Outcome, res.Class)
		}
		return err
	})
	if got > 3*width || srv.ShortWaves() > 0 {
		t.Errorf("%d waves of %d concurrent submissions opened %d connections, want at most %d (%v)", waves, width, got, 3*width, srv)
	}
}
