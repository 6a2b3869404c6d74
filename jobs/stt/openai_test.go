package stt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// openAIRequest is a submission of a local recording.
func openAIRequest() Request {
	open, _ := audioFrom(wavBytes)
	h := make(http.Header)
	h.Set("X-Admitted-At", "2026-03-01T12:00:00Z")
	return Request{
		IdempotencyKey: "t1:call-42:9f86d0",
		TenantID:       "t1",
		CallID:         "call-42",
		AudioURL:       "file:///var/recordings/t1/call-42.wav",
		OpenAudio:      open,
		AudioName:      "call-42.wav",
		RequestID:      "attempt-3",
		Header:         h,
	}
}

func newOpenAI(t *testing.T, v *vendor) *OpenAI {
	t.Helper()
	o, err := NewOpenAI(v.config())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOpenAIResponses(t *testing.T) {
	t.Parallel()
	ms := func(d time.Duration) *time.Duration { return &d }
	rateLimit := fixture(t, "openai", "error_rate_limit.json")
	tests := []struct {
		name        string
		handler     http.HandlerFunc
		outcome     Outcome
		class       string
		status      int
		retryAfter  *string
		vendorDelay *time.Duration
		delayHeader string
		delayRaw    string
		message     string
	}{
		{name: "200 verbose_json", handler: answer(200, fixture(t, "openai", "verbose_json.json"), "X-Request-Id", "req_abc123"),
			outcome: OutcomeCompleted, class: ClassCompleted, status: 200},
		{name: "429 insufficient_quota", handler: answer(429, fixture(t, "openai", "error_insufficient_quota.json"), "Retry-After", "20"),
			outcome: OutcomeQuotaExhausted, class: ClassQuotaExhausted, status: 429, retryAfter: strp("20"), message: "exceeded your current quota"},
		{name: "429 project spend limit", handler: answer(429, fixture(t, "openai", "error_project_spend_limit.json")),
			outcome: OutcomeQuotaExhausted, class: ClassQuotaExhausted, status: 429},
		{name: "429 retry-after-ms wins", handler: answer(429, rateLimit, "retry-after-ms", "1500", "Retry-After", "2", "x-ratelimit-reset-requests", "6m0s"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("2"),
			vendorDelay: ms(1500 * time.Millisecond), delayHeader: "retry-after-ms", delayRaw: "1500", message: "Rate limit reached"},
		{name: "429 fractional retry-after-ms", handler: answer(429, rateLimit, "retry-after-ms", "20.5"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429,
			vendorDelay: ms(20500 * time.Microsecond), delayHeader: "retry-after-ms", delayRaw: "20.5"},
		{name: "429 Retry-After beats x-ratelimit-reset-requests", handler: answer(429, rateLimit, "Retry-After", "20", "x-ratelimit-reset-requests", "6m0s"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("20")},
		{name: "429 x-ratelimit-reset-requests alone", handler: answer(429, rateLimit, "x-ratelimit-reset-requests", "1h2m3.5s"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429,
			vendorDelay: ms(time.Hour + 2*time.Minute + 3500*time.Millisecond), delayHeader: "x-ratelimit-reset-requests", delayRaw: "1h2m3.5s"},
		{name: "429 malformed retry-after-ms falls to Retry-After", handler: answer(429, rateLimit, "retry-after-ms", "soon", "Retry-After", "5"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("5"), delayHeader: "retry-after-ms", delayRaw: "soon"},
		{name: "429 malformed retry-after-ms falls to x-ratelimit", handler: answer(429, rateLimit, "retry-after-ms", "NaN", "x-ratelimit-reset-requests", "20ms"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429,
			vendorDelay: ms(20 * time.Millisecond), delayHeader: "x-ratelimit-reset-requests", delayRaw: "20ms"},
		{name: "429 malformed x-ratelimit-reset-requests reported raw", handler: answer(429, rateLimit, "x-ratelimit-reset-requests", "a while"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, delayHeader: "x-ratelimit-reset-requests", delayRaw: "a while"},
		{name: "429 negative retry-after-ms passed on for the policy", handler: answer(429, rateLimit, "retry-after-ms", "-250"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429,
			vendorDelay: ms(-250 * time.Millisecond), delayHeader: "retry-after-ms", delayRaw: "-250"},
		{name: "429 no timing signal", handler: answer(429, rateLimit),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429},
		{name: "400 invalid file format", handler: answer(400, fixture(t, "openai", "error_invalid_file_format.json")),
			outcome: OutcomePermanent, class: ClassInvalidRequest, status: 400, message: "Invalid file format"},
		{name: "401 invalid api key", handler: answer(401, fixture(t, "openai", "error_invalid_api_key.json")),
			outcome: OutcomePermanent, class: ClassUnauthorized, status: 401, message: "Incorrect API key"},
		{name: "403 unsupported region", handler: answer(403, fixture(t, "openai", "error_unsupported_region.json")),
			outcome: OutcomePermanent, class: ClassForbidden, status: 403},
		{name: "404 model not found", handler: answer(404, fixture(t, "openai", "error_model_not_found.json")),
			outcome: OutcomePermanent, class: ClassNotFound, status: 404, message: "does not exist"},
		{name: "413 too large", handler: answer(413, fixture(t, "openai", "error_too_large.json")),
			outcome: OutcomePermanent, class: ClassAudioTooLarge, status: 413},
		{name: "500", handler: answer(500, fixture(t, "openai", "error_server.json")),
			outcome: OutcomeTransient, class: ClassServerError, status: 500},
		{name: "502", handler: answer(502, []byte("<html>bad gateway</html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassServerError, status: 502},
		{name: "504", handler: answer(504, nil),
			outcome: OutcomeTransient, class: ClassServerError, status: 504},
		{name: "503 overloaded", handler: answer(503, fixture(t, "openai", "error_overloaded.json")),
			outcome: OutcomeTransient, class: ClassUnavailable, status: 503, message: "overloaded"},
		{name: "503 with retry-after", handler: answer(503, fixture(t, "openai", "error_overloaded.json"), "Retry-After", "10"),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp("10")},
		{name: "503 with retry-after-ms", handler: answer(503, fixture(t, "openai", "error_overloaded.json"), "retry-after-ms", "800"),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503,
			vendorDelay: ms(800 * time.Millisecond), delayHeader: "retry-after-ms", delayRaw: "800"},
		{name: "200 not JSON", handler: answer(200, []byte("The beach was a popular spot."), "Content-Type", "text/plain"),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 JSON without text", handler: answer(200, []byte(`{"language": "english"}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "error with a numeric code", handler: answer(429, []byte(`{"error": {"message": "busy", "type": "requests", "code": 429}}`)),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, message: "busy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, tt.handler)
			got, err := newOpenAI(t, v).Submit(t.Context(), openAIRequest())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if !eqp(got.RetryAfter, tt.retryAfter) {
				t.Errorf("RetryAfter = %s, want %s", show(got.RetryAfter), show(tt.retryAfter))
			}
			switch {
			case (got.VendorDelay == nil) != (tt.vendorDelay == nil):
				t.Errorf("VendorDelay = %v, want %v", got.VendorDelay, tt.vendorDelay)
			case got.VendorDelay != nil && *got.VendorDelay != *tt.vendorDelay:
				t.Errorf("VendorDelay = %v, want %v", *got.VendorDelay, *tt.vendorDelay)
			}
			if got.VendorDelayHeader != tt.delayHeader || got.VendorDelayRaw != tt.delayRaw {
				t.Errorf("vendor delay header %q raw %q, want %q %q", got.VendorDelayHeader, got.VendorDelayRaw, tt.delayHeader, tt.delayRaw)
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

func TestOpenAITranscript(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "openai", "verbose_json.json"), "X-Request-Id", "req_abc123"))
	got, err := newOpenAI(t, v).Submit(t.Context(), openAIRequest())
	mustNoErr(t, err)
	tr := got.Transcript
	if tr == nil {
		t.Fatalf("no transcript: %+v", got)
	}
	if got.ProviderID != "req_abc123" || tr.ProviderID != "req_abc123" {
		t.Errorf("ProviderID %q / %q, want the x-request-id", got.ProviderID, tr.ProviderID)
	}
	if tr.Language != "en" { // "english"
		t.Errorf("Language = %q", tr.Language)
	}
	if !strings.HasPrefix(tr.Text, "The beach was a popular spot") || tr.DurationSeconds != 8.470000267028809 {
		t.Errorf("Text %q Duration %v", tr.Text, tr.DurationSeconds)
	}
	if len(tr.Segments) != 2 || tr.Segments[0].Text != "The beach was a popular spot on a hot summer day." ||
		tr.Segments[1].Start != 3.319999933242798 || tr.Segments[1].End != 8.470000267028809 {
		t.Fatalf("Segments = %+v", tr.Segments)
	}
	c0, c1 := math.Exp(-0.2860786020755768), math.Exp(-0.1165315642952919)
	if d := tr.Segments[0].Confidence - c0; math.Abs(d) > 1e-12 {
		t.Errorf("segment confidence = %v, want exp(avg_logprob) = %v", tr.Segments[0].Confidence, c0)
	}
	w0, w1 := 3.319999933242798, 8.470000267028809-3.319999933242798
	want := (w0*c0 + w1*c1) / (w0 + w1)
	if math.Abs(tr.Confidence-want) > 1e-12 {
		t.Errorf("Confidence = %v, want the duration-weighted mean %v", tr.Confidence, want)
	}
}

func TestOpenAILanguages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, fixture, requested, want string
		confidence                     float64
	}{
		{"german", "verbose_json_german.json", "", "de", math.Exp(-0.05)},
		{"a name Whisper does not know", "verbose_json_unknown_language.json", "", "", -1},
		{"unknown name is not replaced by the request", "verbose_json_unknown_language.json", "en", "", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVendor(t, answer(200, fixture(t, "openai", tt.fixture)))
			req := openAIRequest()
			req.Language = tt.requested
			got, err := newOpenAI(t, v).Submit(t.Context(), req)
			mustNoErr(t, err)
			checkOutcome(t, got, OutcomeCompleted, ClassCompleted, 200)
			if got.Transcript.Language != tt.want || math.Abs(got.Transcript.Confidence-tt.confidence) > 1e-12 {
				t.Errorf("Language %q Confidence %v, want %q %v", got.Transcript.Language, got.Transcript.Confidence, tt.want, tt.confidence)
			}
		})
	}
	// A compatible server that answers a code, or no language at all.
	v := newVendor(t, answer(200, []byte(`{"language": "EN", "duration": 1, "text": "hi"}`)), answer(200, []byte(`{"text": "hi"}`)))
	o := newOpenAI(t, v)
	req := openAIRequest()
	req.Language = "fr"
	for _, want := range []string{"en", "fr"} {
		got, err := o.Submit(t.Context(), req)
		mustNoErr(t, err)
		if got.Transcript == nil || got.Transcript.Language != want {
			t.Errorf("transcript %+v, want language %q", got.Transcript, want)
		}
	}
}

// TestOpenAIRequest checks headers and the multipart form.
func TestOpenAIRequest(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"", "de"} {
		v := newVendor(t, answer(200, fixture(t, "openai", "verbose_json.json")))
		req := openAIRequest()
		req.Language = lang
		_, err := newOpenAI(t, v).Submit(t.Context(), req)
		mustNoErr(t, err)
		got := v.only(t)
		if got.Method != http.MethodPost || got.Path != "/v1/audio/transcriptions" {
			t.Errorf("request line %s %s", got.Method, got.Path)
		}
		for name, want := range map[string]string{
			"Authorization":   "Bearer " + testKey,
			"Idempotency-Key": req.IdempotencyKey,
			"X-Request-Id":    "attempt-3",
			"X-Admitted-At":   "2026-03-01T12:00:00Z",
		} {
			if g := got.Header.Get(name); g != want {
				t.Errorf("header %s = %q, want %q", name, g, want)
			}
		}
		fields, file, fileHeader := parseMultipart(t, got)
		want := map[string]string{"model": "whisper-1", "response_format": "verbose_json", "timestamp_granularities[]": "segment"}
		if lang != "" {
			want["language"] = lang
		}
		if len(fields) != len(want) {
			t.Errorf("fields = %v, want %v", fields, want)
		}
		for k, w := range want {
			if fields[k] != w {
				t.Errorf("field %s = %q, want %q", k, fields[k], w)
			}
		}
		if !bytes.Equal(file, wavBytes) {
			t.Errorf("file part has %d bytes, want the %d audio bytes", len(file), len(wavBytes))
		}
		if _, params, _ := mime.ParseMediaType(fileHeader.Get("Content-Disposition")); params["filename"] != "call-42.wav" {
			t.Errorf("file part disposition %q", fileHeader.Get("Content-Disposition"))
		}
		if fileHeader.Get("Content-Type") != "audio/wav" {
			t.Errorf("file part content type %q", fileHeader.Get("Content-Type"))
		}
		if got.ContentLength != -1 || len(got.TransferEncoding) == 0 {
			t.Errorf("without AudioBytes the upload is chunked: length %d, transfer encoding %v", got.ContentLength, got.TransferEncoding)
		}
	}
}

// parseMultipart splits a captured multipart request into its fields and
// its file.
func parseMultipart(t *testing.T, c capture) (fields map[string]string, file []byte, fileHeader textproto.MIMEHeader) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(c.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("Content-Type %q: %v", c.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(bytes.NewReader(c.Body), params["boundary"])
	fields = map[string]string{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		if p.FormName() == "file" {
			file, fileHeader = b, p.Header
			continue
		}
		fields[p.FormName()] = string(b)
	}
	return fields, file, fileHeader
}

// TestOpenAIStreamsTheUpload proves the audio is not buffered: the vendor
// reads the form's fields and the first audio bytes while the audio source
// is still waiting to produce the rest.
func TestOpenAIStreamsTheUpload(t *testing.T) {
	t.Parallel()
	head, tail := wavBytes[:100], wavBytes[100:]
	sawHead := make(chan struct{})
	srv := newRawServer(t, func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			t.Errorf("multipart: %v", err)
			return
		}
		var got []byte
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("multipart: %v", err)
				return
			}
			if p.FormName() != "file" {
				continue
			}
			buf := make([]byte, len(head))
			if _, err := io.ReadFull(p, buf); err != nil {
				t.Errorf("reading the first audio bytes: %v", err)
				return
			}
			close(sawHead) // the client has not produced the rest yet
			rest, err := io.ReadAll(p)
			if err != nil {
				t.Errorf("reading the rest: %v", err)
				return
			}
			got = append(buf, rest...)
		}
		if !bytes.Equal(got, wavBytes) {
			t.Errorf("vendor received %d audio bytes, want %d", len(got), len(wavBytes))
		}
		answer(200, fixture(t, "openai", "verbose_json.json"))(w, r)
	})
	o, err := NewOpenAI(Config{BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()})
	mustNoErr(t, err)
	req := openAIRequest()
	req.OpenAudio = func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(head), &gatedReader{gate: sawHead, r: bytes.NewReader(tail)})), nil
	}
	got, err := o.Submit(t.Context(), req)
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeCompleted, ClassCompleted, 200)
}

// gatedReader blocks its first read until gate closes. A guard turns a
// buffering client (which would deadlock) into a failure instead of a hang.
type gatedReader struct {
	gate <-chan struct{}
	r    io.Reader
}

func (g *gatedReader) Read(p []byte) (int, error) {
	select {
	case <-g.gate:
	case <-time.After(10 * time.Second):
		return 0, errors.New("the vendor never saw the first audio bytes: the upload is buffered, not streamed")
	}
	return g.r.Read(p)
}

// TestOpenAIContentLength: with AudioBytes the upload carries an exact
// Content-Length, and audio of another length is the caller's error.
func TestOpenAIContentLength(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "openai", "verbose_json.json")))
	o := newOpenAI(t, v)
	req := openAIRequest()
	req.AudioBytes = int64(len(wavBytes))
	got, err := o.Submit(t.Context(), req)
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeCompleted, ClassCompleted, 200)
	c := v.only(t)
	if c.ContentLength != int64(len(c.Body)) || len(c.TransferEncoding) != 0 {
		t.Errorf("Content-Length %d for a %d-byte body (transfer encoding %v)", c.ContentLength, len(c.Body), c.TransferEncoding)
	}
	if _, file, _ := parseMultipart(t, c); !bytes.Equal(file, wavBytes) {
		t.Error("file part differs from the audio")
	}

	for _, n := range []int64{int64(len(wavBytes)) - 1, int64(len(wavBytes)) + 1} {
		req.AudioBytes = n
		_, err := o.Submit(t.Context(), req)
		if !errors.Is(err, ErrAudioUnreadable) {
			t.Errorf("AudioBytes %d for %d bytes: %v, want ErrAudioUnreadable", n, len(wavBytes), err)
		}
	}
}

func TestOpenAIMisuse(t *testing.T) {
	t.Parallel()
	v := newVendor(t, answer(200, fixture(t, "openai", "verbose_json.json")))
	o := newOpenAI(t, v)

	req := openAIRequest()
	req.OpenAudio = nil
	if _, err := o.Submit(t.Context(), req); !errors.Is(err, ErrNoAudio) {
		t.Errorf("no OpenAudio: %v, want ErrNoAudio", err)
	}
	req.OpenAudio = func(context.Context) (io.ReadCloser, error) { return nil, errDisk }
	if _, err := o.Submit(t.Context(), req); !errors.Is(err, ErrAudioUnreadable) || !errors.Is(err, errDisk) {
		t.Errorf("OpenAudio fails: %v, want ErrAudioUnreadable wrapping the cause", err)
	}
	req.OpenAudio = failingAudio(wavBytes[:64], errDisk)
	if _, err := o.Submit(t.Context(), req); !errors.Is(err, ErrAudioUnreadable) || !errors.Is(err, errDisk) {
		t.Errorf("audio fails mid-stream: %v, want ErrAudioUnreadable wrapping the cause", err)
	}
	if _, err := o.Poll(t.Context(), "x"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Poll: %v", err)
	}
	if _, err := o.Reconcile(t.Context(), "k"); !errors.Is(err, ErrCannotReconcile) {
		t.Errorf("Reconcile: %v", err)
	}
	if o.Name() != KindOpenAI || o.Capabilities() != (Capabilities{}) {
		t.Errorf("Name %q Capabilities %+v", o.Name(), o.Capabilities())
	}
}

// TestOpenAIClosesTheAudio: the audio source is closed whatever happens.
func TestOpenAIClosesTheAudio(t *testing.T) {
	t.Parallel()
	for _, h := range []http.HandlerFunc{
		answer(200, fixture(t, "openai", "verbose_json.json")),
		answer(401, fixture(t, "openai", "error_invalid_api_key.json")),
		resetConnection(t),
	} {
		v := newVendor(t, h)
		req := openAIRequest()
		open, closed := audioFrom(wavBytes)
		req.OpenAudio = open
		_, err := newOpenAI(t, v).Submit(t.Context(), req)
		mustNoErr(t, err)
		if !closed() {
			t.Error("audio left open")
		}
	}
}

// TestOpenAIEarlyAnswer: a vendor that refuses before reading the upload
// is an ordinary answer, and the upload goroutine ends.
func TestOpenAIEarlyAnswer(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, answer(401, fixture(t, "openai", "error_invalid_api_key.json"))) // without reading the body
	big := bytes.Repeat(wavBytes, 256)                                                      // 2 MiB: more than the socket buffers
	req := openAIRequest()
	open, closed := audioFrom(big)
	req.OpenAudio = open
	o, err := NewOpenAI(Config{BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()})
	mustNoErr(t, err)
	got, err := o.Submit(t.Context(), req)
	mustNoErr(t, err)
	if got.Outcome != OutcomePermanent && got.Outcome != OutcomeTransient {
		t.Errorf("outcome %q class %q", got.Outcome, got.Class)
	}
	if !closed() {
		t.Error("audio left open")
	}
}
