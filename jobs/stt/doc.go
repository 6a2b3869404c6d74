// Package stt is the vendor side of callscribe's transcription pipeline: one
// Provider interface and four adapters that speak to speech-to-text vendors
// over HTTP with net/http.
//
//	kind          constructor      API                                   async  reconcile
//	generic-http  NewGenericHTTP   stt-http/v1 (docs/stt-http-v1.md)     yes    yes
//	openai        NewOpenAI        POST /v1/audio/transcriptions         no     no
//	deepgram      NewDeepgram      POST /v1/listen (pre-recorded)        no     no
//	assemblyai    NewAssemblyAI    POST /v2/transcript, GET .../{id}     yes    no
//
// New builds one by kind from a Config (base URL, API key, model, an
// injectable *http.Client, a per-exchange timeout, a response size limit),
// each field with a documented default.
//
// # What it guarantees
//
// Every answer the network or the vendor gives becomes a Response: an
// Outcome the worker acts on (completed, pending, throttled, quota
// exhausted, permanent, transient, not found), a short stable Class for the
// ledger event and metrics, the HTTP status, the vendor's id, and the
// transcript when there is one. Connection resets, timeouts, bodies that
// are not JSON or not the vendor's shape, bodies over the size limit and
// statuses no rule covers are transient Responses, never an error or a
// panic. A returned error means misuse or configuration only: an operation
// the vendor lacks (ErrNotSupported, ErrCannotReconcile), missing or
// unreadable audio (ErrNoAudio, ErrAudioUnreadable), an empty required
// argument (ErrInvalidArgument).
//
// Timing signals are reported raw, never interpreted: the Retry-After of a
// 429 or 503 exactly as received (RetryAfter), a vendor's own delay header
// (VendorDelay with VendorDelayHeader and VendorDelayRaw) when it is the
// better signal, and the Retry-After of a pending answer (PollAfter); the
// Date of an error response comes with them (Date). The worker turns them
// into a deadline with ledger/retryafter: VendorDelay when set
// (Policy.DecideDelay), else RetryAfter (Policy.DecideFor, an HTTP-date
// measured against Date when that is valid), which falls back to backoff
// when the header is missing or malformed.
//
// Transcripts are normalised: Language is a lower-case ISO 639-1 code
// whatever the vendor says ("english", "en_us", "de-CH"), segment times are
// seconds (AssemblyAI's milliseconds are converted), Confidence is 0..1 or
// -1 when the vendor gives none; each adapter documents how it derives it.
//
// Credentials stay in: an API key, the audio URL (which may be presigned),
// and any URL's query string or user info are removed from every
// Response.Message and every error, and the adapters log nothing. Response
// bodies are read up to Config.MaxResponseBytes (4 MiB by default). Uploads
// (openai always, deepgram and assemblyai for audio that is not at an
// http(s) URL) are streamed from Request.OpenAudio, never buffered whole.
//
// Redirects are never followed: a 3xx is a permanent
// ClassUnexpectedRedirect and its Location is not contacted. A BaseURL with
// scheme http is refused unless its host is loopback (127.0.0.0/8, ::1,
// "localhost") or Config.AllowInsecureHTTP is set.
//
// # What it does not do
//
// It keeps no state between calls and does not retry: deciding when to
// retry, poll, reconcile or give up, and extending the shared throttling
// deadline, are the worker's job (package jobs). It does not use
// stt-http/v1 batches. It does not hold slots or leases (package capacity).
// Deepgram's and AssemblyAI's callbacks and streaming APIs are not used.
package stt
