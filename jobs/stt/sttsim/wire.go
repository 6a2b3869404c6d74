package sttsim

import (
	"encoding/json"
	"math"
	"time"
)

// contentType is the Content-Type of every answer.
const contentType = "application/json; charset=utf-8"

// Transcription statuses.
const (
	statusQueued     = "queued"
	statusProcessing = "processing"
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

// Error types of stt-http/v1.
const (
	errInvalidRequest       = "invalid_request"
	errUnauthorized         = "unauthorized"
	errForbidden            = "forbidden"
	errNotFound             = "not_found"
	errUnsupportedMedia     = "unsupported_media"
	errAudioTooLarge        = "audio_too_large"
	errIdempotencyKeyReused = "idempotency_key_reused"
	errRateLimited          = "rate_limited"
	errServerError          = "server_error"
	errUnavailable          = "unavailable"
	errTranscriptionFailed  = "transcription_failed"
)

// apiError is the error object: the value of an error body's "error", and
// of a failed transcription's.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// errorBody is the body of every answer that is not a transcription or a
// batch.
type errorBody struct {
	Error apiError `json:"error"`
}

// transcriptionJSON is the transcription object. text, language,
// confidence, duration_seconds and segments are present only when
// completed; metadata and error are always present, null when empty.
type transcriptionJSON struct {
	ID              string          `json:"id"`
	IdempotencyKey  string          `json:"idempotency_key"`
	Status          string          `json:"status"`
	Text            *string         `json:"text,omitempty"`
	Language        *string         `json:"language,omitempty"`
	Confidence      *float64        `json:"confidence,omitempty"`
	DurationSeconds *float64        `json:"duration_seconds,omitempty"`
	Segments        *[]segmentJSON  `json:"segments,omitempty"`
	Metadata        json.RawMessage `json:"metadata"`
	Error           *apiError       `json:"error"`
}

type segmentJSON struct {
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Text       string  `json:"text"`
	Confidence float64 `json:"confidence"`
}

// batchJSON is the batch object.
type batchJSON struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Items  []batchItemJSON `json:"items"`
}

// batchItemJSON is one item of a batch: transcription_id is null for an
// item refused at intake; transcription is present when completed, error
// when failed.
type batchItemJSON struct {
	IdempotencyKey  string             `json:"idempotency_key"`
	TranscriptionID *string            `json:"transcription_id"`
	Status          string             `json:"status"`
	Transcription   *transcriptionJSON `json:"transcription,omitempty"`
	Error           *apiError          `json:"error,omitempty"`
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

// transcriptionView is t as the wire shows it at now.
func transcriptionView(t *transcription, now time.Time) transcriptionJSON {
	v := transcriptionJSON{
		ID:             t.id,
		IdempotencyKey: t.key,
		Status:         t.status(now),
		Metadata:       t.req.Metadata,
	}
	switch v.Status {
	case statusCompleted:
		r := t.result
		text, lang, conf, dur := r.Text, r.Language, r.Confidence, seconds(r.Duration)
		segs := make([]segmentJSON, len(r.Segments))
		for i, s := range r.Segments {
			segs[i] = segmentJSON{Start: seconds(s.Start), End: seconds(s.End), Text: s.Text, Confidence: s.Confidence}
		}
		v.Text, v.Language, v.Confidence, v.DurationSeconds, v.Segments = &text, &lang, &conf, &dur, &segs
	case statusFailed:
		e := *t.failure
		v.Error = &e
	}
	return v
}
