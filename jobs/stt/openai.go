package stt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// OpenAI speaks the OpenAI audio transcription API (POST
// /v1/audio/transcriptions), and so any OpenAI-compatible server. It is
// synchronous: Submit answers completed or an error, Poll and Reconcile
// are not supported.
//
// The audio is always uploaded, streamed from Request.OpenAudio as
// multipart/form-data, with response_format=verbose_json and
// timestamp_granularities[]=segment (whisper-1; the gpt-4o transcribe
// models refuse verbose_json with a 400). Idempotency-Key is sent anyway:
// OpenAI ignores it, it is harmless, and an OpenAI-compatible gateway may
// honour it.
//
// Transcript.Language maps verbose_json's language name ("english") to its
// code ("en"); a server that answers a code keeps it. Confidence: each
// segment's is exp(avg_logprob), clamped to 0..1; the transcript's is their
// mean weighted by segment duration (plain mean if every segment is empty);
// -1 without segments. ProviderID is the x-request-id response header, as
// OpenAI has no transcription id.
type OpenAI struct {
	ep    *endpoint
	model string
}

// NewOpenAI returns the openai adapter. Config.APIKey is required;
// BaseURL defaults to OpenAIBaseURLDefault, Model to OpenAIModelDefault.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	ep, m, err := cfg.resolve(adapterDefaults{kind: KindOpenAI, baseURL: OpenAIBaseURLDefault, model: OpenAIModelDefault})
	if err != nil {
		return nil, err
	}
	return &OpenAI{ep: ep, model: m}, nil
}

// Name returns "openai".
func (o *OpenAI) Name() string { return KindOpenAI }

// Capabilities: synchronous, not reconcilable.
func (o *OpenAI) Capabilities() Capabilities { return Capabilities{} }

// Poll returns ErrNotSupported: the API is synchronous.
func (o *OpenAI) Poll(context.Context, string) (Response, error) {
	return Response{}, fmt.Errorf("%w: openai transcription is synchronous", ErrNotSupported)
}

// Reconcile returns ErrCannotReconcile: OpenAI keeps no record by key.
func (o *OpenAI) Reconcile(context.Context, string) (Response, error) {
	return Response{}, fmt.Errorf("%w: openai", ErrCannotReconcile)
}

// openAIVerbose is the verbose_json transcription.
type openAIVerbose struct {
	Task     string  `json:"task"`
	Language string  `json:"language"`
	Duration float64 `json:"duration"`
	Text     *string `json:"text"`
	Segments []struct {
		Start        float64  `json:"start"`
		End          float64  `json:"end"`
		Text         string   `json:"text"`
		AvgLogprob   *float64 `json:"avg_logprob"`
		NoSpeechProb float64  `json:"no_speech_prob"`
	} `json:"segments"`
}

// openAIError is {"error": {"message", "type", "param", "code"}}.
type openAIError struct {
	Error *struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"` // a string, null, or on some compatible servers a number
	} `json:"error"`
}

// openAIQuotaCodes are the error codes and types of a 429 that no wait
// will cure: the account has no credit or hit a spending limit.
var openAIQuotaCodes = map[string]bool{
	"insufficient_quota":                true,
	"billing_hard_limit_reached":        true,
	"credit_balance_exhausted":          true,
	"organization_spend_limit_exceeded": true,
	"project_spend_limit_exceeded":      true,
	"organization_usage_limit_exceeded": true,
}

// errExchangeDone stops the upload when the exchange is over.
var errExchangeDone = errors.New("stt: exchange finished")

// Submit uploads the audio and returns the transcript or what went wrong.
func (o *OpenAI) Submit(ctx context.Context, req Request) (Response, error) {
	s := newScrubber(o.ep.apiKey, req.AudioURL)
	audio, err := openAudio(ctx, req, s)
	if err != nil {
		return Response{}, err
	}
	name := audioName(req)
	fields := [][2]string{
		{"model", model(req, o.model)},
		{"response_format", "verbose_json"},
		{"timestamp_granularities[]", "segment"},
	}
	if req.Language != "" {
		fields = append(fields, [2]string{"language", req.Language})
	}
	// writeHead writes the fields and the file part's header; the audio
	// follows, then the closing boundary.
	writeHead := func(mw *multipart.Writer) (io.Writer, error) {
		for _, f := range fields {
			if err := mw.WriteField(f[0], f[1]); err != nil {
				return nil, err
			}
		}
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, quoteEscaper.Replace(name)))
		h.Set("Content-Type", audioContentType(name))
		return mw.CreatePart(h)
	}

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	contentLength := int64(-1)
	if req.AudioBytes > 0 {
		// A dry run over a counter with the same boundary gives the exact
		// length without buffering the audio.
		var n countingWriter
		dry := multipart.NewWriter(&n)
		if err := dry.SetBoundary(mw.Boundary()); err != nil {
			_ = audio.Close()
			return Response{}, fmt.Errorf("stt: openai: %w", err)
		}
		if _, err := writeHead(dry); err != nil {
			_ = audio.Close()
			return Response{}, fmt.Errorf("stt: openai: %w", err)
		}
		_ = dry.Close()
		contentLength = int64(n) + req.AudioBytes
	}
	uploaded := make(chan struct{})
	go func() {
		defer close(uploaded)
		defer func() { _ = audio.Close() }()
		err := func() error {
			fw, err := writeHead(mw)
			if err != nil {
				return err
			}
			if _, err := io.Copy(fw, audio); err != nil {
				return err
			}
			return mw.Close()
		}()
		_ = pw.CloseWithError(err) // nil: the reader sees EOF
	}()

	rep, failed, err := o.ep.exchange(ctx, s, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, o.ep.URL("/v1/audio/transcriptions", nil), pr)
		if err != nil {
			return nil, err
		}
		if contentLength >= 0 {
			r.ContentLength = contentLength
		}
		setHeaders(r, req.Header, map[string]string{
			"Authorization":   "Bearer " + o.ep.apiKey,
			"Content-Type":    mw.FormDataContentType(),
			"Accept":          "application/json",
			"Idempotency-Key": req.IdempotencyKey,
			"X-Request-Id":    req.RequestID,
		})
		return r, nil
	})
	_ = pr.CloseWithError(errExchangeDone) // unblock an upload the server stopped reading
	<-uploaded
	if aerr := audio.finish(); aerr != nil {
		return Response{}, aerr
	}
	if err != nil {
		return Response{}, fmt.Errorf("stt: openai: %w", err)
	}
	if failed != nil {
		return *failed, nil
	}
	return o.interpret(rep, req.Language, s), nil
}

// interpret maps an OpenAI answer to a Response.
func (o *OpenAI) interpret(rep vendorhttp.Reply, requested string, s scrubber) Response {
	if rep.OK() {
		if rep.Status != http.StatusOK {
			return errorResponse(rep, OutcomeTransient, ClassUnexpectedStatus, "", s)
		}
		var v openAIVerbose
		if err := json.Unmarshal(rep.Body, &v); err != nil {
			return badResponse(rep, "unparseable verbose_json: "+err.Error(), s)
		}
		if v.Text == nil {
			return badResponse(rep, "verbose_json without text", s)
		}
		id := rep.Header.Get("X-Request-Id")
		tr := &Transcript{
			Text:            *v.Text,
			Language:        normalizeLanguage(v.Language),
			DurationSeconds: v.Duration,
			ProviderID:      id,
		}
		if tr.Language == "" && v.Language == "" {
			tr.Language = normalizeLanguage(requested)
		}
		var weighted, weights, plain float64
		var rated int
		for _, seg := range v.Segments {
			c := -1.0
			if seg.AvgLogprob != nil {
				c = clamp01(math.Exp(*seg.AvgLogprob))
				w := math.Max(seg.End-seg.Start, 0)
				weighted += w * c
				weights += w
				plain += c
				rated++
			}
			tr.Segments = append(tr.Segments, Segment{Start: seg.Start, End: seg.End, Text: strings.TrimSpace(seg.Text), Confidence: c})
		}
		switch {
		case rated == 0:
			tr.Confidence = -1
		case weights > 0:
			tr.Confidence = clamp01(weighted / weights)
		default:
			tr.Confidence = clamp01(plain / float64(rated))
		}
		return Response{Outcome: OutcomeCompleted, Class: ClassCompleted, HTTPStatus: rep.Status, ProviderID: id, Transcript: tr}
	}

	var e openAIError
	msg := vendorhttp.PlainText(rep)
	var code, typ string
	if json.Unmarshal(rep.Body, &e) == nil && e.Error != nil {
		msg, typ = e.Error.Message, e.Error.Type
		if json.Unmarshal(e.Error.Code, &code) != nil {
			code = ""
		}
	}
	outcome, class := commonStatus(rep.Status, rep.Header)
	throttleSignals := false
	switch rep.Status {
	case http.StatusTooManyRequests:
		if openAIQuotaCodes[code] || openAIQuotaCodes[typ] {
			outcome, class = OutcomeQuotaExhausted, ClassQuotaExhausted
		} else {
			throttleSignals = true
		}
	case http.StatusServiceUnavailable:
		if rep.Header.Get("Retry-After-Ms") != "" || len(rep.Header.Values("Retry-After")) > 0 {
			outcome, throttleSignals = OutcomeThrottled, true
		}
	}
	r := errorResponse(rep, outcome, class, msg, s)
	if throttleSignals {
		openAIDelay(&r, rep.Header)
	}
	return r
}

// openAIDelay reads OpenAI's own timing headers, in order of preference:
// retry-after-ms (milliseconds, may be fractional), then Retry-After (left
// raw in RetryAfter for the worker's policy), then
// x-ratelimit-reset-requests (a Go-like duration such as "6m0s"). The first
// vendor header that parses sets VendorDelay; x-ratelimit-reset-requests
// is read only when there is no Retry-After. When none parses, the first
// vendor header present is still reported raw.
func openAIDelay(r *Response, h http.Header) {
	var firstName, firstRaw string
	try := func(name string, bare time.Duration) bool {
		raw := vendorhttp.RawHeader(h, name)
		if raw == nil {
			return false
		}
		if firstName == "" {
			firstName, firstRaw = name, *raw
		}
		d, ok := parseVendorDelay(*raw, bare)
		if ok {
			r.VendorDelay, r.VendorDelayHeader, r.VendorDelayRaw = &d, name, *raw
		}
		return ok
	}
	if !try("retry-after-ms", time.Millisecond) && r.RetryAfter == nil {
		try("x-ratelimit-reset-requests", time.Second)
	}
	if r.VendorDelay == nil && firstName != "" {
		r.VendorDelayHeader, r.VendorDelayRaw = firstName, firstRaw
	}
}

// quoteEscaper escapes a multipart file name, as mime/multipart does, and
// drops line breaks, which would end the part's header.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"", "\r", "", "\n", "")

// countingWriter counts what is written to it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
