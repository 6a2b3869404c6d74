package stt

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func newDeepgram(t *testing.T, v *vendor) *Deepgram {
	t.Helper()
	d, err := NewDeepgram(v.config())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// deepgramURLRequest is a recording Deepgram can fetch itself.
func deepgramURLRequest() Request {
	return Request{
		IdempotencyKey: "t1:call-42:9f86d0",
		AudioURL:       "https://recordings.example.com/t1/call-42.wav?X-Amz-Signature=SECRETSIG",
		Header:         http.Header{"X-Admitted-At": {"2026-03-01T12:00:00Z"}},
	}
}

func TestDeepgramResponses(t *testing.T) {
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
		{name: "200 with detected language", handler: answer(200, fixture(t, "deepgram", "listen_detected_language.json")),
			outcome: OutcomeCompleted, class: ClassCompleted, status: 200, providerID: "a3f1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b"},
		{name: "400 bad request", handler: answer(400, fixture(t, "deepgram", "error_bad_request.json")),
			outcome: OutcomePermanent, class: ClassInvalidRequest, status: 400, providerID: "7e1c7e0a-3f0b-4a7e-9a51-2f0f4bbf0f11", message: "corrupt or unsupported data"},
		{name: "400 invalid JSON (category shape)", handler: answer(400, fixture(t, "deepgram", "error_invalid_json.json")),
			outcome: OutcomePermanent, class: ClassInvalidRequest, status: 400, providerID: "6d2b8a0c-9f3e-4c1d-8b7a-5e4f3d2c1b0a", message: "Invalid JSON submitted. Json deserialize error"},
		{name: "401 invalid credentials", handler: answer(401, fixture(t, "deepgram", "error_invalid_auth.json")),
			outcome: OutcomePermanent, class: ClassUnauthorized, status: 401, providerID: "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9", message: "Invalid credentials."},
		{name: "402 insufficient credits", handler: answer(402, fixture(t, "deepgram", "error_payment_required.json")),
			outcome: OutcomeQuotaExhausted, class: ClassQuotaExhausted, status: 402, providerID: "2a3b4c5d-6e7f-4081-92a3-b4c5d6e7f809", message: "enough credits"},
		{name: "403 model not allowed", handler: answer(403, fixture(t, "deepgram", "error_insufficient_permissions.json")),
			outcome: OutcomePermanent, class: ClassForbidden, status: 403, providerID: "3b4c5d6e-7f80-4192-a3b4-c5d6e7f8091a"},
		{name: "404 project not found", handler: answer(404, fixture(t, "deepgram", "error_project_not_found.json")),
			outcome: OutcomePermanent, class: ClassNotFound, status: 404, message: "Project not found."},
		{name: "404 plain text", handler: answer(404, []byte("UUID parsing failed: invalid character"), "Content-Type", "text/plain; charset=utf-8"),
			outcome: OutcomePermanent, class: ClassNotFound, status: 404, message: "UUID parsing failed"},
		{name: "413 payload too large", handler: answer(413, fixture(t, "deepgram", "error_payload_too_large.json")),
			outcome: OutcomePermanent, class: ClassAudioTooLarge, status: 413, providerID: "4c5d6e7f-8091-42a3-b4c5-d6e7f8091a2b"},
		{name: "415 unsupported media type", handler: answer(415, fixture(t, "deepgram", "error_unsupported_media_type.json")),
			outcome: OutcomePermanent, class: ClassUnsupportedMedia, status: 415, providerID: "5d6e7f80-91a2-43b4-c5d6-e7f8091a2b3c"},
		{name: "422 upload interrupted", handler: answer(422, fixture(t, "deepgram", "error_unprocessable.json")),
			outcome: OutcomeTransient, class: ClassUploadInterrupted, status: 422, providerID: "6e7f8091-a2b3-44c5-d6e7-f8091a2b3c4d"},
		{name: "429 has no timing signal", handler: answer(429, fixture(t, "deepgram", "error_too_many_requests.json")),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, providerID: "7f8091a2-b3c4-45d6-e7f8-091a2b3c4d5e", message: "Too many requests"},
		{name: "429 with a Retry-After a proxy added", handler: answer(429, fixture(t, "deepgram", "error_too_many_requests.json"), "Retry-After", "11"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, providerID: "7f8091a2-b3c4-45d6-e7f8-091a2b3c4d5e", retryAfter: strp("11")},
		{name: "500", handler: answer(500, nil),
			outcome: OutcomeTransient, class: ClassServerError, status: 500},
		{name: "503 (error_code shape)", handler: answer(503, fixture(t, "deepgram", "error_service_unavailable.json")),
			outcome: OutcomeTransient, class: ClassUnavailable, status: 503, providerID: "8091a2b3-c4d5-46e7-f809-1a2b3c4d5e6f", message: "Please try again later"},
		{name: "200 not JSON", handler: answer(200, []byte("ok"), "Content-Type", "text/plain"),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 without channels", handler: answer(200, fixture(t, "deepgram", "listen_no_channels.json")),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newDeepgram(t, v).Submit(t.Context(), deepgramURLRequest())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if got.ProviderID != tt.providerID {
				t.Errorf("ProviderID = %q, want %q", got.ProviderID, tt.providerID)
			}
			if !eqp(got.RetryAfter, tt.retryAfter) || got.VendorDelay != nil || got.VendorDelayHeader != "" {
				t.Errorf("timing: RetryAfter %s VendorDelay %v %q, want RetryAfter %s only", show(got.RetryAfter), got.VendorDelay, got.VendorDelayHeader, show(tt.retryAfter))
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

func TestDeepgramTranscript(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "deepgram", "listen_detected_language.json")))
	got, err := newDeepgram(t, v).Submit(t.Context(), deepgramURLRequest())
	mustNoErr(t, err)
	tr := got.Transcript
	if tr == nil {
		t.Fatalf("no transcript: %+v", got)
	}
	if tr.Text != "Grüezi, hier ist Dana von Northline." || tr.Language != "de" || tr.Confidence != 0.9953125 ||
		tr.DurationSeconds != 25.933313 || tr.ProviderID != "a3f1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b" {
		t.Errorf("transcript = %+v", tr)
	}
	if len(tr.Segments) != 6 {
		t.Fatalf("Segments = %+v", tr.Segments)
	}
	if first, last := tr.Segments[0], tr.Segments[5]; first != (Segment{Start: 0.08, End: 0.56, Text: "Grüezi,", Confidence: 0.99121094}) ||
		last != (Segment{Start: 1.52, End: 2.24, Text: "Northline.", Confidence: 0.8491211}) {
		t.Errorf("first %+v last %+v", first, last)
	}

	// With the language given, there is no detected_language: the
	// requested one is reported.
	v2 := newVendor(t, answer(200, fixture(t, "deepgram", "listen_language_set.json")))
	req := deepgramURLRequest()
	req.Language = "en"
	got, err = newDeepgram(t, v2).Submit(t.Context(), req)
	mustNoErr(t, err)
	if got.Transcript == nil || got.Transcript.Language != "en" || got.Transcript.Text != "Pickup moves to Tuesday." {
		t.Errorf("transcript = %+v", got.Transcript)
	}
}

// TestDeepgramRequest: a fetchable URL goes as JSON; anything else is
// uploaded raw.
func TestDeepgramRequest(t *testing.T) {
	t.Parallel()
	t.Run("url with detect_language", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t, answer(200, fixture(t, "deepgram", "listen_detected_language.json")))
		req := deepgramURLRequest()
		_, err := newDeepgram(t, v).Submit(t.Context(), req)
		mustNoErr(t, err)
		got := v.only(t)
		q, _ := url.ParseQuery(got.RawQuery)
		if got.Method != http.MethodPost || got.Path != "/v1/listen" ||
			q.Get("model") != "nova-2" || q.Get("smart_format") != "true" || q.Get("detect_language") != "true" || q.Has("language") {
			t.Errorf("request %s %s?%s", got.Method, got.Path, got.RawQuery)
		}
		if got.Header.Get("Authorization") != "Token "+testKey || got.Header.Get("Content-Type") != "application/json" ||
			got.Header.Get("X-Admitted-At") != "2026-03-01T12:00:00Z" {
			t.Errorf("headers %v", got.Header)
		}
		var body map[string]string
		if err := json.Unmarshal(got.Body, &body); err != nil || len(body) != 1 || body["url"] != req.AudioURL {
			t.Errorf("body %s (%v), want {\"url\": the audio URL}", got.Body, err)
		}
	})
	t.Run("raw upload with language and model", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t, answer(200, fixture(t, "deepgram", "listen_language_set.json")))
		open, closed := audioFrom(wavBytes)
		req := Request{AudioURL: "file:///var/recordings/t1/call-42.mp3", OpenAudio: open, Language: "en", Model: "nova-2-phonecall", AudioBytes: int64(len(wavBytes))}
		_, err := newDeepgram(t, v).Submit(t.Context(), req)
		mustNoErr(t, err)
		got := v.only(t)
		q, _ := url.ParseQuery(got.RawQuery)
		if q.Get("language") != "en" || q.Has("detect_language") || q.Get("model") != "nova-2-phonecall" {
			t.Errorf("query %s", got.RawQuery)
		}
		if got.Header.Get("Content-Type") != "audio/mpeg" || !bytes.Equal(got.Body, wavBytes) || got.ContentLength != int64(len(wavBytes)) {
			t.Errorf("Content-Type %q, %d bytes, Content-Length %d", got.Header.Get("Content-Type"), len(got.Body), got.ContentLength)
		}
		if !closed() {
			t.Error("audio left open")
		}
	})
	t.Run("raw upload of unknown type without a URL", func(t *testing.T) {
		t.Parallel()
		v := newVendor(t, answer(200, fixture(t, "deepgram", "listen_language_set.json")))
		open, _ := audioFrom(wavBytes)
		_, err := newDeepgram(t, v).Submit(t.Context(), Request{OpenAudio: open, AudioName: "call-42"})
		mustNoErr(t, err)
		got := v.only(t)
		if got.Header.Get("Content-Type") != "audio/wav" || !bytes.Equal(got.Body, wavBytes) || got.ContentLength != -1 {
			t.Errorf("Content-Type %q, %d bytes, Content-Length %d", got.Header.Get("Content-Type"), len(got.Body), got.ContentLength)
		}
	})
}

func TestDeepgramMisuse(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "deepgram", "listen_language_set.json")))
	d := newDeepgram(t, v)
	if _, err := d.Submit(t.Context(), Request{AudioURL: "file:///x.wav"}); !errors.Is(err, ErrNoAudio) {
		t.Errorf("local audio without OpenAudio: %v", err)
	}
	req := Request{AudioURL: "file:///x.wav", OpenAudio: failingAudio(wavBytes[:10], errDisk)}
	if _, err := d.Submit(t.Context(), req); !errors.Is(err, ErrAudioUnreadable) || !errors.Is(err, errDisk) {
		t.Errorf("audio fails mid-upload: %v", err)
	}
	open, _ := audioFrom(wavBytes)
	req = Request{AudioURL: "file:///x.wav", OpenAudio: open, AudioBytes: int64(len(wavBytes)) + 10}
	if _, err := d.Submit(t.Context(), req); !errors.Is(err, ErrAudioUnreadable) {
		t.Errorf("audio shorter than AudioBytes: %v", err)
	}
	if _, err := d.Poll(t.Context(), "x"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Poll: %v", err)
	}
	if _, err := d.Reconcile(t.Context(), "k"); !errors.Is(err, ErrCannotReconcile) {
		t.Errorf("Reconcile: %v", err)
	}
	if d.Name() != KindDeepgram || d.Capabilities() != (Capabilities{}) {
		t.Errorf("Name %q Capabilities %+v", d.Name(), d.Capabilities())
	}
}
