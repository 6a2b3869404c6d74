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

// Deepgram speaks Deepgram's pre-recorded API (POST /v1/listen). It is
// synchronous: Poll and Reconcile are not supported.
//
// An http(s) AudioURL is sent as {"url": ...} for Deepgram to fetch; any
// other audio is uploaded raw from Request.OpenAudio with a Content-Type
// from the file extension (audio/wav when unknown). The query asks for
// smart_format, and detect_language unless Request.Language is set.
//
// ProviderID is metadata.request_id. Transcript.Confidence is the first
// alternative's confidence, clamped to 0..1 (-1 if absent); Segments are
// its words (punctuated when smart_format gives them), each with its own
// confidence. Transcript.Language is the channel's detected_language
// without its region ("de-CH" → "de"), else the requested language.
//
// Deepgram's 429 carries no Retry-After: the Response is throttled with no
// timing signal (RetryAfter is still reported if a proxy adds one), and the
// worker's fallback backoff sets the deadline. 402 (no credit) is
// OutcomeQuotaExhausted; 422 (Deepgram did not receive the whole upload)
// is transient ClassUploadInterrupted.
type Deepgram struct {
	ep    *endpoint
	model string
}

// NewDeepgram returns the deepgram adapter. Config.APIKey is required;
// BaseURL defaults to DeepgramBaseURLDefault, Model to DeepgramModelDefault.
func NewDeepgram(cfg Config) (*Deepgram, error) {
	ep, m, err := cfg.resolve(adapterDefaults{kind: KindDeepgram, baseURL: DeepgramBaseURLDefault, model: DeepgramModelDefault})
	if err != nil {
		return nil, err
	}
	return &Deepgram{ep: ep, model: m}, nil
}

// Name returns "deepgram".
func (d *Deepgram) Name() string { return KindDeepgram }

// Capabilities: synchronous, not reconcilable.
func (d *Deepgram) Capabilities() Capabilities { return Capabilities{} }

// Poll returns ErrNotSupported: pre-recorded transcription is synchronous.
func (d *Deepgram) Poll(context.Context, string) (Response, error) {
	return Response{}, fmt.Errorf("%w: deepgram pre-recorded transcription is synchronous", ErrNotSupported)
}

// Reconcile returns ErrCannotReconcile: Deepgram has no lookup by key.
func (d *Deepgram) Reconcile(context.Context, string) (Response, error) {
	return Response{}, fmt.Errorf("%w: deepgram", ErrCannotReconcile)
}

// deepgramListen is the pre-recorded response.
type deepgramListen struct {
	Metadata struct {
		RequestID string  `json:"request_id"`
		Duration  float64 `json:"duration"`
	} `json:"metadata"`
	Results *struct {
		Channels []struct {
			DetectedLanguage string `json:"detected_language"`
			Alternatives     []struct {
				Transcript string   `json:"transcript"`
				Confidence *float64 `json:"confidence"`
				Words      []struct {
					Word           string   `json:"word"`
					PunctuatedWord string   `json:"punctuated_word"`
					Start          float64  `json:"start"`
					End            float64  `json:"end"`
					Confidence     *float64 `json:"confidence"`
				} `json:"words"`
			} `json:"alternatives"`
		} `json:"channels"`
	} `json:"results"`
}

// deepgramError covers the shapes of Deepgram's error bodies:
// {"err_code", "err_msg", "request_id"}, {"category", "message", "details",
// "request_id"}, and the 503's {"error_code", "err_msg"}.
type deepgramError struct {
	ErrCode   string `json:"err_code"`
	ErrorCode string `json:"error_code"`
	Category  string `json:"category"`
	ErrMsg    string `json:"err_msg"`
	Message   string `json:"message"`
	Details   string `json:"details"`
	RequestID string `json:"request_id"`
}

func (e deepgramError) message() string {
	switch {
	case e.ErrMsg != "":
		return e.ErrMsg
	case e.Message != "" && e.Details != "":
		return e.Message + " " + e.Details
	}
	return e.Message
}

// Submit sends the audio (by URL, or uploaded) to /v1/listen.
func (d *Deepgram) Submit(ctx context.Context, req Request) (Response, error) {
	s := newScrubber(d.ep.apiKey, req.AudioURL)
	q := url.Values{"model": {model(req, d.model)}, "smart_format": {"true"}}
	if req.Language != "" {
		q.Set("language", req.Language)
	} else {
		q.Set("detect_language", "true")
	}
	target := d.ep.URL("/v1/listen", q)

	var (
		body          io.Reader
		audio         *audioBody
		contentType   = "application/json"
		contentLength = int64(-1)
	)
	if httpAudioURL(req.AudioURL) {
		b, err := json.Marshal(map[string]string{"url": req.AudioURL})
		if err != nil {
			return Response{}, fmt.Errorf("stt: deepgram: encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	} else {
		var err error
		if audio, err = openAudio(ctx, req, s); err != nil {
			return Response{}, err
		}
		body, contentType = audio, audioContentType(audioName(req))
		if req.AudioBytes > 0 {
			contentLength = req.AudioBytes
		}
	}

	rep, failed, err := d.ep.exchange(ctx, s, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, target, body)
		if err != nil {
			return nil, err
		}
		if audio != nil && contentLength >= 0 {
			r.ContentLength = contentLength
		}
		setHeaders(r, req.Header, map[string]string{
			"Authorization": "Token " + d.ep.apiKey,
			"Content-Type":  contentType,
			"Accept":        "application/json",
		})
		return r, nil
	})
	if audio != nil {
		if aerr := audio.finish(); aerr != nil {
			return Response{}, aerr
		}
	}
	if err != nil {
		return Response{}, fmt.Errorf("stt: deepgram: %w", err)
	}
	if failed != nil {
		return *failed, nil
	}
	return d.interpret(rep, req.Language, s), nil
}

// interpret maps a Deepgram answer to a Response.
func (d *Deepgram) interpret(rep vendorhttp.Reply, requested string, s scrubber) Response {
	if rep.OK() {
		if rep.Status != http.StatusOK {
			return errorResponse(rep, OutcomeTransient, ClassUnexpectedStatus, "", s)
		}
		var l deepgramListen
		if err := json.Unmarshal(rep.Body, &l); err != nil {
			return badResponse(rep, "unparseable listen response: "+err.Error(), s)
		}
		if l.Results == nil || len(l.Results.Channels) == 0 || len(l.Results.Channels[0].Alternatives) == 0 {
			return badResponse(rep, "listen response without results.channels[0].alternatives[0]", s)
		}
		ch := l.Results.Channels[0]
		alt := ch.Alternatives[0]
		lang := normalizeLanguage(ch.DetectedLanguage)
		if lang == "" {
			lang = normalizeLanguage(requested)
		}
		tr := &Transcript{
			Text:            alt.Transcript,
			Language:        lang,
			Confidence:      confidenceOr(alt.Confidence),
			DurationSeconds: l.Metadata.Duration,
			ProviderID:      l.Metadata.RequestID,
		}
		for _, w := range alt.Words {
			text := w.PunctuatedWord
			if text == "" {
				text = w.Word
			}
			tr.Segments = append(tr.Segments, Segment{Start: w.Start, End: w.End, Text: text, Confidence: confidenceOr(w.Confidence)})
		}
		return Response{Outcome: OutcomeCompleted, Class: ClassCompleted, HTTPStatus: rep.Status, ProviderID: l.Metadata.RequestID, Transcript: tr}
	}

	var e deepgramError
	msg := vendorhttp.PlainText(rep)
	if json.Unmarshal(rep.Body, &e) == nil {
		if m := e.message(); m != "" {
			msg = m
		}
	}
	outcome, class := commonStatus(rep.Status, rep.Header)
	switch rep.Status {
	case http.StatusPaymentRequired:
		outcome, class = OutcomeQuotaExhausted, ClassQuotaExhausted
	case http.StatusUnprocessableEntity:
		outcome, class = OutcomeTransient, ClassUploadInterrupted
	}
	r := errorResponse(rep, outcome, class, msg, s)
	r.ProviderID = e.RequestID
	return r
}
