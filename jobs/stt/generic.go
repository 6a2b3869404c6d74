package stt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// GenericHTTP speaks stt-http/v1, the generic protocol of
// docs/stt-http-v1.md: single requests, and manifests through its batch
// section (SubmitBatch, PollBatch).
//
// Confidence is the server's transcription-level "confidence", clamped to
// 0..1, or -1 when it is null or absent; a segment's likewise.
type GenericHTTP struct {
	ep    *endpoint
	model string
}

// NewGenericHTTP returns the generic-http adapter. Config.BaseURL and
// Config.APIKey are required; Config.Model defaults to
// GenericHTTPModelDefault.
func NewGenericHTTP(cfg Config) (*GenericHTTP, error) {
	ep, m, err := cfg.resolve(adapterDefaults{kind: KindGenericHTTP, model: GenericHTTPModelDefault})
	if err != nil {
		return nil, err
	}
	return &GenericHTTP{ep: ep, model: m}, nil
}

// Name returns "generic-http".
func (g *GenericHTTP) Name() string { return KindGenericHTTP }

// Capabilities: asynchronous, reconcilable by idempotency key, and able to
// send manifests.
func (g *GenericHTTP) Capabilities() Capabilities {
	return Capabilities{Async: true, Reconcile: true, Batch: true}
}

// genericSubmitBody is the body of POST /v1/transcriptions.
type genericSubmitBody struct {
	AudioURL    string          `json:"audio_url"`
	AudioSHA256 string          `json:"audio_sha256"`
	Model       string          `json:"model"`
	Language    string          `json:"language,omitempty"`
	TenantID    string          `json:"tenant_id"`
	Metadata    genericMetadata `json:"metadata"`
}

type genericMetadata struct {
	CallID string `json:"call_id"`
}

// genericTranscription is the protocol's transcription object.
type genericTranscription struct {
	ID              string   `json:"id"`
	IdempotencyKey  string   `json:"idempotency_key"`
	Status          string   `json:"status"`
	Text            *string  `json:"text"`
	Language        string   `json:"language"`
	Confidence      *float64 `json:"confidence"`
	DurationSeconds float64  `json:"duration_seconds"`
	Segments        []struct {
		Start      float64  `json:"start"`
		End        float64  `json:"end"`
		Text       string   `json:"text"`
		Confidence *float64 `json:"confidence"`
	} `json:"segments"`
	Error *genericErrorBody `json:"error"`
}

// genericError is the protocol's error object, {"error": {...}}.
type genericError struct {
	Error *genericErrorBody `json:"error"`
}

type genericErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// genericPermanentTypes are the protocol's error types that may name the
// class of a permanent 400, 404, 413, 415 or 422.
var genericPermanentTypes = map[string]bool{
	ClassInvalidRequest: true, ClassNotFound: true, ClassUnsupportedMedia: true,
	ClassAudioTooLarge: true, ClassIdempotencyKeyReused: true,
}

// Submit sends POST /v1/transcriptions with the business key as
// Idempotency-Key and the per-attempt X-Request-Id.
func (g *GenericHTTP) Submit(ctx context.Context, req Request) (Response, error) {
	if req.IdempotencyKey == "" {
		return Response{}, fmt.Errorf("%w: generic-http: Request.IdempotencyKey is required", ErrInvalidArgument)
	}
	if req.AudioURL == "" {
		return Response{}, fmt.Errorf("%w: generic-http needs Request.AudioURL", ErrNoAudio)
	}
	s := newScrubber(g.ep.apiKey, req.AudioURL)
	body, err := json.Marshal(genericSubmitBody{
		AudioURL:    req.AudioURL,
		AudioSHA256: req.AudioSHA256,
		Model:       model(req, g.model),
		Language:    req.Language,
		TenantID:    req.TenantID,
		Metadata:    genericMetadata{CallID: req.CallID},
	})
	if err != nil {
		return Response{}, fmt.Errorf("stt: generic-http: encoding request: %w", err)
	}
	rep, failed, err := g.send(ctx, s, http.MethodPost, g.ep.URL("/v1/transcriptions", nil), body, req.Header, req.IdempotencyKey, req.RequestID)
	if err != nil || failed != nil {
		return derefOr(failed), err
	}
	return g.interpret(rep, opSubmit, req.Language, s), nil
}

// send makes one request of the protocol: method to target with body (nil:
// none), the caller's extra headers, and the adapter's own (which win):
// Authorization, Accept, Content-Type with a body, and Idempotency-Key and
// X-Request-Id when not empty. failed is the Response of a request that got
// no answer.
func (g *GenericHTTP) send(ctx context.Context, s scrubber, method, target string, body []byte, extra http.Header,
	idempotencyKey, requestID string) (rep vendorhttp.Reply, failed *Response, err error) {
	own := map[string]string{
		"Authorization":   "Bearer " + g.ep.apiKey,
		"Accept":          "application/json",
		"Idempotency-Key": idempotencyKey,
		"X-Request-Id":    requestID,
	}
	if body != nil {
		own["Content-Type"] = "application/json; charset=utf-8"
	}
	rep, failed, err = g.ep.exchange(ctx, s, func(ctx context.Context) (*http.Request, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		r, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return nil, err
		}
		setHeaders(r, extra, own)
		return r, nil
	})
	if err != nil {
		err = fmt.Errorf("stt: generic-http: %w", err)
	}
	return rep, failed, err
}

// derefOr is *r, or the zero Response when r is nil.
func derefOr(r *Response) Response {
	if r == nil {
		return Response{}
	}
	return *r
}

// Poll sends GET /v1/transcriptions/{id}.
func (g *GenericHTTP) Poll(ctx context.Context, providerID string) (Response, error) {
	if providerID == "" {
		return Response{}, fmt.Errorf("%w: generic-http: empty provider id", ErrInvalidArgument)
	}
	return g.get(ctx, g.ep.URL("/v1/transcriptions/"+url.PathEscape(providerID), nil), opPoll)
}

// Reconcile sends GET /v1/transcriptions?idempotency_key=<key>: the
// transcription the key created, in any status, or OutcomeNotFound on 404.
func (g *GenericHTTP) Reconcile(ctx context.Context, idempotencyKey string) (Response, error) {
	if idempotencyKey == "" {
		return Response{}, fmt.Errorf("%w: generic-http: empty idempotency key", ErrInvalidArgument)
	}
	return g.get(ctx, g.ep.URL("/v1/transcriptions", url.Values{"idempotency_key": {idempotencyKey}}), opReconcile)
}

// get makes a poll or reconcile request.
func (g *GenericHTTP) get(ctx context.Context, target string, op operation) (Response, error) {
	s := newScrubber(g.ep.apiKey, "")
	rep, failed, err := g.send(ctx, s, http.MethodGet, target, nil, nil, "", "")
	if err != nil || failed != nil {
		return derefOr(failed), err
	}
	return g.interpret(rep, op, "", s), nil
}

// operation says which call a reply answers: the same status means
// different things to each.
type operation int

const (
	opSubmit operation = iota
	opPoll
	opReconcile
)

// interpret applies the protocol's response table.
func (g *GenericHTTP) interpret(rep vendorhttp.Reply, op operation, requested string, s scrubber) Response {
	switch rep.Status {
	case http.StatusOK, http.StatusAccepted:
		var t genericTranscription
		if err := json.Unmarshal(rep.Body, &t); err != nil {
			return badResponse(rep, "unparseable transcription: "+err.Error(), s)
		}
		return g.transcription(rep, t, op, requested, s)
	}

	var e genericError
	msg := vendorhttp.PlainText(rep)
	if json.Unmarshal(rep.Body, &e) == nil && e.Error != nil {
		msg = e.Error.Message
	}
	outcome, class := commonStatus(rep.Status, rep.Header)
	switch rep.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		if e.Error != nil && genericPermanentTypes[e.Error.Type] {
			class = e.Error.Type
		}
		if rep.Status == http.StatusNotFound && op != opSubmit {
			outcome, class = OutcomeNotFound, ClassNotFound
		}
	}
	return errorResponse(rep, outcome, class, msg, s)
}

// transcription maps a transcription object to a Response.
func (g *GenericHTTP) transcription(rep vendorhttp.Reply, t genericTranscription, op operation, requested string, s scrubber) Response {
	if t.ID == "" {
		return badResponse(rep, "transcription without an id", s)
	}
	r := Response{HTTPStatus: rep.Status, ProviderID: t.ID}
	switch t.Status {
	case "completed":
		if t.Text == nil {
			return badResponse(rep, "completed transcription without text", s)
		}
		lang := normalizeLanguage(t.Language)
		if lang == "" {
			lang = normalizeLanguage(requested)
		}
		tr := &Transcript{
			Text:            *t.Text,
			Language:        lang,
			Confidence:      confidenceOr(t.Confidence),
			DurationSeconds: t.DurationSeconds,
			ProviderID:      t.ID,
		}
		for _, seg := range t.Segments {
			tr.Segments = append(tr.Segments, Segment{Start: seg.Start, End: seg.End, Text: seg.Text, Confidence: confidenceOr(seg.Confidence)})
		}
		r.Outcome, r.Class, r.Transcript = OutcomeCompleted, ClassCompleted, tr
	case "queued", "processing":
		r.Outcome, r.PollAfter = OutcomePending, vendorhttp.RawHeader(rep.Header, "Retry-After")
		switch {
		case op == opSubmit:
			r.Class = ClassAccepted
		case t.Status == "queued":
			r.Class = ClassQueued
		default:
			r.Class = ClassProcessing
		}
	case "failed":
		r.Outcome, r.Class = OutcomePermanent, ClassTranscriptionFailed
		if t.Error != nil {
			r.Message = s.Message(t.Error.Message)
		}
	default:
		return badResponse(rep, fmt.Sprintf("unknown transcription status %q", t.Status), s)
	}
	return r
}
