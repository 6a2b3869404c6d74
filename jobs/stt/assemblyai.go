package stt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// AssemblyAI speaks AssemblyAI's asynchronous API: POST /v2/transcript
// answers a queued transcript (OutcomePending with its id), and Poll reads
// GET /v2/transcript/{id} until it is completed or error. AssemblyAI cannot
// be asked about an idempotency key: Reconcile returns ErrCannotReconcile.
//
// AssemblyAI fetches the audio itself, so an http(s) AudioURL is sent as
// audio_url; any other audio (file://) is first uploaded raw from
// Request.OpenAudio to POST /v2/upload, and the upload_url it answers is
// submitted instead. Without Request.Language the request asks for
// language_detection; Config.Model, when set, is sent as speech_model.
//
// Transcript.Confidence is the transcript's confidence, clamped to 0..1
// (-1 if null); Segments are its words, their start and end converted from
// milliseconds to seconds; DurationSeconds is audio_duration (whole
// seconds); Language is language_code without its region ("en_us" → "en").
//
// Error answers: 429 is throttled (RetryAfter reported if present); 400 is
// permanent invalid_request, except that a negative account balance is
// OutcomeQuotaExhausted, and on Poll "transcript id not found" is
// OutcomeNotFound, like a 404; 401 unauthorized; 5xx transient (503 with
// Retry-After throttled).
type AssemblyAI struct {
	ep    *endpoint
	model string
}

// NewAssemblyAI returns the assemblyai adapter. Config.APIKey is required;
// BaseURL defaults to AssemblyAIBaseURLDefault; Model defaults to none
// (AssemblyAI's default speech model).
func NewAssemblyAI(cfg Config) (*AssemblyAI, error) {
	ep, m, err := cfg.resolve(adapterDefaults{kind: KindAssemblyAI, baseURL: AssemblyAIBaseURLDefault, model: AssemblyAIModelDefault})
	if err != nil {
		return nil, err
	}
	return &AssemblyAI{ep: ep, model: m}, nil
}

// Name returns "assemblyai".
func (a *AssemblyAI) Name() string { return KindAssemblyAI }

// Capabilities: asynchronous, not reconcilable.
func (a *AssemblyAI) Capabilities() Capabilities { return Capabilities{Async: true} }

// Reconcile returns ErrCannotReconcile: AssemblyAI has no lookup by key.
func (a *AssemblyAI) Reconcile(context.Context, string) (Response, error) {
	return Response{}, fmt.Errorf("%w: assemblyai", ErrCannotReconcile)
}

// assemblyAISubmit is the body of POST /v2/transcript.
type assemblyAISubmit struct {
	AudioURL          string `json:"audio_url"`
	LanguageCode      string `json:"language_code,omitempty"`
	LanguageDetection bool   `json:"language_detection,omitempty"`
	SpeechModel       string `json:"speech_model,omitempty"`
}

// assemblyAITranscript is the transcript object.
type assemblyAITranscript struct {
	ID            string   `json:"id"`
	Status        string   `json:"status"`
	Text          *string  `json:"text"`
	LanguageCode  *string  `json:"language_code"`
	Confidence    *float64 `json:"confidence"`
	AudioDuration *float64 `json:"audio_duration"`
	Words         []struct {
		Text       string   `json:"text"`
		Start      float64  `json:"start"` // milliseconds
		End        float64  `json:"end"`   // milliseconds
		Confidence *float64 `json:"confidence"`
	} `json:"words"`
	Error *string `json:"error"`
}

// assemblyAIError is {"error": "..."}; the newer APIs say {"detail": "..."}.
type assemblyAIError struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// Submit uploads local audio if need be, then creates the transcript.
func (a *AssemblyAI) Submit(ctx context.Context, req Request) (Response, error) {
	s := newScrubber(a.ep.apiKey, req.AudioURL)
	audioURL := req.AudioURL
	if !httpAudioURL(audioURL) {
		uploaded, resp, err := a.upload(ctx, req, s)
		if err != nil || resp != nil {
			return derefResponse(resp), err
		}
		audioURL = uploaded
	}
	body, err := json.Marshal(assemblyAISubmit{
		AudioURL:          audioURL,
		LanguageCode:      req.Language,
		LanguageDetection: req.Language == "",
		SpeechModel:       model(req, a.model),
	})
	if err != nil {
		return Response{}, fmt.Errorf("stt: assemblyai: encoding request: %w", err)
	}
	rep, failed, err := a.ep.exchange(ctx, s, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, a.ep.URL("/v2/transcript", nil), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		setHeaders(r, req.Header, map[string]string{
			"Authorization": a.ep.apiKey,
			"Content-Type":  "application/json",
			"Accept":        "application/json",
		})
		return r, nil
	})
	if err != nil {
		return Response{}, fmt.Errorf("stt: assemblyai: %w", err)
	}
	if failed != nil {
		return *failed, nil
	}
	return a.interpret(rep, opSubmit, req.Language, s), nil
}

// upload sends the audio bytes to POST /v2/upload and returns the
// upload_url, or the Response that ends the Submit.
func (a *AssemblyAI) upload(ctx context.Context, req Request, s scrubber) (string, *Response, error) {
	audio, err := openAudio(ctx, req, s)
	if err != nil {
		return "", nil, err
	}
	rep, failed, err := a.ep.exchange(ctx, s, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, a.ep.URL("/v2/upload", nil), audio)
		if err != nil {
			return nil, err
		}
		if req.AudioBytes > 0 {
			r.ContentLength = req.AudioBytes
		}
		setHeaders(r, req.Header, map[string]string{
			"Authorization": a.ep.apiKey,
			"Content-Type":  "application/octet-stream",
			"Accept":        "application/json",
		})
		return r, nil
	})
	if aerr := audio.finish(); aerr != nil {
		return "", nil, aerr
	}
	if err != nil {
		return "", nil, fmt.Errorf("stt: assemblyai: %w", err)
	}
	if failed != nil {
		return "", failed, nil
	}
	if !rep.OK() {
		r := a.interpret(rep, opSubmit, "", s)
		return "", &r, nil
	}
	var u struct {
		UploadURL string `json:"upload_url"`
	}
	if err := json.Unmarshal(rep.Body, &u); err != nil || u.UploadURL == "" {
		r := badResponse(rep, "upload answer without upload_url", s)
		return "", &r, nil
	}
	return u.UploadURL, nil, nil
}

// Poll reads GET /v2/transcript/{id}.
func (a *AssemblyAI) Poll(ctx context.Context, providerID string) (Response, error) {
	if providerID == "" {
		return Response{}, fmt.Errorf("%w: assemblyai: empty provider id", ErrInvalidArgument)
	}
	s := newScrubber(a.ep.apiKey, "")
	rep, failed, err := a.ep.exchange(ctx, s, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, a.ep.URL("/v2/transcript/"+url.PathEscape(providerID), nil), nil)
		if err != nil {
			return nil, err
		}
		setHeaders(r, nil, map[string]string{"Authorization": a.ep.apiKey, "Accept": "application/json"})
		return r, nil
	})
	if err != nil {
		return Response{}, fmt.Errorf("stt: assemblyai: %w", err)
	}
	if failed != nil {
		return *failed, nil
	}
	return a.interpret(rep, opPoll, "", s), nil
}

// interpret maps an AssemblyAI answer to a Response.
func (a *AssemblyAI) interpret(rep vendorhttp.Reply, op operation, requested string, s scrubber) Response {
	if rep.OK() {
		var t assemblyAITranscript
		if err := json.Unmarshal(rep.Body, &t); err != nil {
			return badResponse(rep, "unparseable transcript: "+err.Error(), s)
		}
		return a.transcript(rep, t, op, requested, s)
	}

	var e assemblyAIError
	msg := vendorhttp.PlainText(rep)
	if json.Unmarshal(rep.Body, &e) == nil {
		if e.Error != "" {
			msg = e.Error
		} else if e.Detail != "" {
			msg = e.Detail
		}
	}
	lower := strings.ToLower(msg)
	outcome, class := commonStatus(rep.Status, rep.Header)
	switch {
	case rep.Status == http.StatusPaymentRequired,
		rep.Status == http.StatusBadRequest && strings.Contains(lower, "balance") &&
			(strings.Contains(lower, "negative") || strings.Contains(lower, "insufficient") || strings.Contains(lower, "top up")):
		outcome, class = OutcomeQuotaExhausted, ClassQuotaExhausted
	case op == opPoll && (rep.Status == http.StatusNotFound ||
		rep.Status == http.StatusBadRequest && strings.Contains(lower, "not found")):
		outcome, class = OutcomeNotFound, ClassNotFound
	}
	return errorResponse(rep, outcome, class, msg, s)
}

// transcript maps a transcript object to a Response.
func (a *AssemblyAI) transcript(rep vendorhttp.Reply, t assemblyAITranscript, op operation, requested string, s scrubber) Response {
	if t.ID == "" {
		return badResponse(rep, "transcript without an id", s)
	}
	r := Response{HTTPStatus: rep.Status, ProviderID: t.ID}
	switch t.Status {
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
	case "completed":
		if t.Text == nil {
			return badResponse(rep, "completed transcript without text", s)
		}
		lang := ""
		if t.LanguageCode != nil {
			lang = normalizeLanguage(*t.LanguageCode)
		}
		if lang == "" {
			lang = normalizeLanguage(requested)
		}
		tr := &Transcript{
			Text:       *t.Text,
			Language:   lang,
			Confidence: confidenceOr(t.Confidence),
			ProviderID: t.ID,
		}
		if t.AudioDuration != nil {
			tr.DurationSeconds = *t.AudioDuration
		}
		for _, w := range t.Words {
			tr.Segments = append(tr.Segments, Segment{Start: w.Start / 1000, End: w.End / 1000, Text: w.Text, Confidence: confidenceOr(w.Confidence)})
		}
		r.Outcome, r.Class, r.Transcript = OutcomeCompleted, ClassCompleted, tr
	case "error":
		r.Outcome, r.Class = OutcomePermanent, ClassTranscriptionFailed
		if t.Error != nil {
			r.Message = s.Message(*t.Error)
		}
	default:
		return badResponse(rep, fmt.Sprintf("unknown transcript status %q", t.Status), s)
	}
	return r
}

// derefResponse returns *r, or the zero Response for nil.
func derefResponse(r *Response) Response {
	if r == nil {
		return Response{}
	}
	return *r
}
