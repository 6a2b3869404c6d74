package stt

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// Request is one submission of one recording.
type Request struct {
	// IdempotencyKey is the business key tenant_id:call_id:sha256. It is
	// sent as Idempotency-Key where the vendor supports it (generic-http,
	// and openai where it is harmless); generic-http requires it.
	IdempotencyKey string
	// TenantID, CallID and AudioSHA256 identify the recording; generic-http
	// sends them in the body.
	TenantID, CallID, AudioSHA256 string
	// AudioURL is where the audio lives: file://, http:// or https://. It
	// may carry credentials (a presigned query string): adapters never log
	// it and never put it, or its query, in an error or a Message.
	AudioURL string
	// OpenAudio opens the audio bytes, for vendors that take an upload
	// (openai always; deepgram and assemblyai when AudioURL is not
	// http(s)). Nil where an upload is needed is ErrNoAudio.
	OpenAudio func(ctx context.Context) (io.ReadCloser, error)
	// AudioName is the file name for uploads, e.g. "call-42.wav"; its
	// extension tells openai the format and deepgram the Content-Type.
	// Default: the last element of AudioURL's path, else "audio.wav".
	AudioName string
	// AudioBytes is the audio's length when known (> 0): uploads then carry
	// a Content-Length, and audio of another length is ErrAudioUnreadable.
	// 0 means unknown (chunked upload).
	AudioBytes int64
	// Model overrides Config.Model for this request; "" means the
	// adapter's configured model.
	Model string
	// Language is the ISO 639-1 code of the spoken language; "" means
	// auto-detect.
	Language string
	// RequestID is a per-attempt id, sent as X-Request-Id where supported
	// (generic-http, openai).
	RequestID string
	// Header holds extra headers sent with every HTTP request Submit makes
	// (the worker adds e.g. X-Admitted-At). The adapter's own headers
	// (Authorization, Content-Type, Idempotency-Key, X-Request-Id) win over
	// these. May be nil.
	Header http.Header
}

// Outcome is what the worker does next. The values are stable strings.
type Outcome string

const (
	// OutcomeCompleted: the transcript is in Response.Transcript; store it.
	OutcomeCompleted Outcome = "completed"
	// OutcomePending: the vendor accepted the audio; poll
	// Response.ProviderID, not before Response.PollAfter when it is set.
	OutcomePending Outcome = "pending"
	// OutcomeThrottled: 429, or 503 with a timing signal. The throttling
	// scope defers: Response.VendorDelay when set, else
	// Response.RetryAfter, else the worker's fallback backoff.
	OutcomeThrottled Outcome = "throttled"
	// OutcomeQuotaExhausted: the account is out of credit or over its
	// spending limit; waiting will not help. Pause the scope until an
	// operator resumes it.
	OutcomeQuotaExhausted Outcome = "quota_exhausted"
	// OutcomePermanent: this recording will not succeed as sent, or the
	// credentials are wrong; do not retry automatically.
	OutcomePermanent Outcome = "permanent"
	// OutcomeTransient: retry with backoff. Whether the vendor accepted
	// the audio is unknown: reconcile first where the vendor can be asked.
	OutcomeTransient Outcome = "transient"
	// OutcomeNotFound: Reconcile, the vendor never saw this key; Poll, the
	// id is unknown.
	OutcomeNotFound Outcome = "not_found"
)

// Response classes: short, stable strings for the ledger event and metrics.
// Response.Class is always one of these.
const (
	ClassCompleted            = "completed"
	ClassAccepted             = "accepted"   // a submit was accepted for asynchronous work
	ClassQueued               = "queued"     // a poll or reconcile found it waiting
	ClassProcessing           = "processing" // a poll or reconcile found it being transcribed
	ClassRateLimited          = vendorhttp.ClassRateLimited
	ClassUnavailable          = vendorhttp.ClassUnavailable
	ClassQuotaExhausted       = "quota_exhausted"
	ClassInvalidRequest       = vendorhttp.ClassInvalidRequest
	ClassUnauthorized         = vendorhttp.ClassUnauthorized
	ClassForbidden            = vendorhttp.ClassForbidden
	ClassNotFound             = vendorhttp.ClassNotFound
	ClassUnsupportedMedia     = "unsupported_media"
	ClassAudioTooLarge        = "audio_too_large"
	ClassIdempotencyKeyReused = "idempotency_key_reused"
	ClassTranscriptionFailed  = "transcription_failed"
	ClassUploadInterrupted    = "upload_interrupted" // the vendor did not receive the whole upload
	ClassServerError          = vendorhttp.ClassServerError
	ClassUnexpectedStatus     = vendorhttp.ClassUnexpectedStatus // a status the adapter has no rule for
	ClassUnexpectedRedirect   = "unexpected_redirect"            // a 3xx: redirects are never followed
	ClassNetwork              = vendorhttp.ClassNetwork
	ClassTimeout              = vendorhttp.ClassTimeout
	ClassCanceled             = vendorhttp.ClassCanceled // the caller's context was canceled
	ClassBadResponse          = vendorhttp.ClassBadResponse
	ClassResponseTooLarge     = vendorhttp.ClassResponseTooLarge
)

// Response is what one call to a vendor came to. Every network failure and
// every vendor answer, however malformed, is a Response; see Provider.
type Response struct {
	// Outcome says what to do next.
	Outcome Outcome
	// Class is a short, stable response class (the Class* constants).
	Class string
	// HTTPStatus is the status received; 0 when no response arrived.
	HTTPStatus int
	// ProviderID is the vendor's id for this transcription when known
	// (for openai, which has none, its x-request-id).
	ProviderID string
	// Transcript is set when Outcome is OutcomeCompleted.
	Transcript *Transcript

	// RetryAfter is the raw Retry-After of an error response exactly as
	// received (several fields joined with ", "); nil if absent.
	RetryAfter *string
	// Date is the raw Date header of the same error response exactly as
	// received; nil if absent. The worker measures an HTTP-date
	// RetryAfter against it (the vendor's clock) rather than its own
	// clock when it is a valid HTTP-date (retryafter's Policy.DecideFor).
	Date *string
	// VendorDelay is a delay read from a vendor-specific header
	// (retry-after-ms, x-ratelimit-reset-requests) when that is the best
	// signal; when set, prefer it to RetryAfter (retryafter's
	// Policy.DecideDelay). It may be negative: the policy handles that.
	VendorDelay *time.Duration
	// VendorDelayHeader names the vendor header read for VendorDelay, and
	// VendorDelayRaw is its raw value. They are set even when the value
	// did not parse (VendorDelay then nil), so the event can record it.
	VendorDelayHeader string
	VendorDelayRaw    string
	// PollAfter is the raw Retry-After on a pending answer (a 202, or a
	// poll/reconcile answer still queued or processing): when to poll
	// next. Nil if absent.
	PollAfter *string

	// Message is the vendor's error message (or the network error),
	// truncated to 200 bytes, with API keys, the audio URL and any URL's
	// query string or user info removed.
	Message string
}

// Transcript is a finished transcription.
type Transcript struct {
	// Text is the whole transcript.
	Text string
	// Language is the spoken language, normalised to a lower-case ISO
	// 639-1 code ("en"); for the two Whisper languages without one,
	// Hawaiian and Cantonese, the ISO 639-3 code ("haw", "yue"). "" if
	// unknown.
	Language string
	// Confidence is in 0..1; how it is derived is documented per adapter.
	// -1 when the vendor gives none.
	Confidence float64
	// DurationSeconds is the audio duration the vendor reported.
	DurationSeconds float64
	// Segments are timed pieces of the transcript, in order: segments for
	// generic-http and openai, words for deepgram and assemblyai.
	Segments []Segment
	// ProviderID is the vendor's id, as in Response.ProviderID.
	ProviderID string
}

// Segment is a timed piece of a transcript.
type Segment struct {
	// Start and End are offsets into the audio, in seconds.
	Start, End float64
	Text       string
	// Confidence is in 0..1, or -1 when the vendor gives none.
	Confidence float64
}

// Capabilities says which optional operations a Provider offers.
type Capabilities struct {
	// Async: Submit may answer OutcomePending, and Poll works.
	Async bool
	// Reconcile: Reconcile can ask the vendor about an idempotency key.
	Reconcile bool
	// Batch: the adapter is a BatchProvider (the vendor may still answer
	// that it offers no batches: ErrBatchUnsupported).
	Batch bool
}

// Provider is one speech-to-text vendor.
//
// A returned error means misuse or configuration only: ErrNotSupported,
// ErrCannotReconcile, ErrNoAudio, ErrAudioUnreadable, ErrInvalidArgument.
// Everything the network or the vendor does (resets, timeouts, non-JSON
// bodies, unexpected statuses, malformed headers) is a Response with an
// Outcome and a Class, and the error is nil. Implementations are safe for
// concurrent use.
type Provider interface {
	// Name is the provider's kind, as New takes it.
	Name() string
	// Capabilities says what Poll and Reconcile can do.
	Capabilities() Capabilities
	// Submit sends one recording.
	Submit(ctx context.Context, req Request) (Response, error)
	// Poll asks about a transcription Submit left pending. Synchronous
	// vendors return ErrNotSupported.
	Poll(ctx context.Context, providerID string) (Response, error)
	// Reconcile asks whether the vendor already accepted a request with
	// this idempotency key: the transcription in any state, or
	// OutcomeNotFound if it never saw the key. Vendors that cannot be asked
	// return ErrCannotReconcile.
	Reconcile(ctx context.Context, idempotencyKey string) (Response, error)
}

var (
	// ErrNotSupported: the provider has no such operation (Poll on a
	// synchronous vendor).
	ErrNotSupported = errors.New("stt: operation not supported by this provider")
	// ErrCannotReconcile: the vendor cannot be asked about an idempotency
	// key. The caller must decide without it (usually: submit again).
	ErrCannotReconcile = errors.New("stt: provider cannot look up a request by idempotency key")
	// ErrNoAudio: the vendor needs the audio bytes and Request.OpenAudio
	// is nil, or needs an audio URL and there is none.
	ErrNoAudio = errors.New("stt: request has no audio the provider can use")
	// ErrAudioUnreadable: OpenAudio failed, reading the audio failed, or
	// the audio is not Request.AudioBytes long.
	ErrAudioUnreadable = errors.New("stt: audio unreadable")
	// ErrInvalidArgument: a required argument is empty.
	ErrInvalidArgument = errors.New("stt: invalid argument")
)

// ConcurrencyRefusal reports whether r is a throttled answer that says the
// vendor's concurrency limit was reached ("too many concurrent requests"),
// rather than a rate or quota: the vendor's real concurrency is below what
// was in flight.
func (r Response) ConcurrencyRefusal() bool {
	if r.Outcome != OutcomeThrottled {
		return false
	}
	m := strings.ToLower(r.Message)
	return strings.Contains(m, "concurren") || strings.Contains(m, "in flight") || strings.Contains(m, "in-flight")
}
