// Package sttsim is a simulated speech-to-text server that speaks
// stt-http/v1 (docs/stt-http-v1.md), the protocol of
// callscribe's generic-http STT provider. Tests, `callscribe demo` and
// `callscribe simulate stt` run it in process, to face callscribe with a
// vendor that throttles, fails, is slow, answers asynchronously and drops
// connections, and to keep the evidence that callscribe behaved.
//
// # Protocol
//
// New returns a Server; Handler serves it under httptest, ListenAndServe
// or Serve on a socket until a context ends. The routes:
//
//	POST /v1/transcriptions                      submit: 200 completed, 202 queued
//	GET  /v1/transcriptions/{id}                 poll: 200 in any status, 404
//	GET  /v1/transcriptions?idempotency_key=K    reconcile: 200 in any status, 404
//	POST /v1/batches                             202 with the batch
//	GET  /v1/batches/{id}                        200 with each item's status, 404
//
// Every request needs Authorization: Bearer with one of Config.APIKeys
// (else 401 unauthorized). A submission is checked in this order:
// Idempotency-Key present (400) and a JSON body (400); then its scope is
// known and throttling applies (429 in a cooldown or over the in-flight
// limit, 503, 5xx: see below), even to a replay; then the fields (400
// when missing, 422 when malformed: an audio_url that is not file, http
// or https, an audio_sha256 that is not 64 hex digits), the model (403
// outside Config.Models), the key's history (the original transcription
// for the same content, 422 idempotency_key_reused for other content),
// and file:// audio (404
// unreadable, 413 over Config.MaxAudioBytes, 415 not a WAVE file). The
// same key and content are never transcribed twice, even by concurrent
// submissions: the later ones wait for the first. A transcriber error
// makes a failed transcription, answered 422 transcription_failed on
// submit and 200 with status "failed" on a poll. Unknown paths get 404
// and known paths with the wrong method 405, with error bodies too.
//
// A batch is one submission of scope (API key, batch model) for
// throttling and idempotency (its Idempotency-Key is the manifest's), but
// its items keep their own keys: an item whose key already created a
// transcription refers to it; an item refused at intake is "failed" with
// its reason while the others go on; new items complete one by one over
// Config.ProcessingTime.
//
// # Trouble and evidence
//
// A scope is an API key and a model. A 429 (Config.RateLimitShare), or a
// 503 with a Retry-After (Config.UnavailableShare), starts a cooldown of
// Config.Cooldown: until its deadline every submission of the scope is
// answered 429 with the remaining time, in Config.RetryAfterForm; other
// scopes are unaffected. Retry-After values err late: a client that
// honours one arrives at or after the deadline. Every answer's Date comes
// from Config.Clock too, so that a client may measure an HTTP-date
// Retry-After against it.
//
// Config.MaxInFlight caps the submissions of a scope in flight at once:
// those being handled (counted from when their body is read, through
// Config.Latency, to their answer) and the asynchronous work accepted with
// 202 and not yet ready (a single transcription, or a whole batch as one).
// Outside a cooldown, a submission that arrives while its scope is full is
// answered 429 rate_limited "too many concurrent requests" with a
// Retry-After of Config.InFlightRetryAfter; that refuses only the request
// and starts no cooldown. The limit is checked after the cooldown and
// before the random trouble knobs. Polls and reconciles never count.
//
// A cooldown is announced by its first answer whose header a client can
// read (delay-seconds or an HTTP-date). A submission that arrives after
// the announcement and before the deadline was either already in flight
// (its X-Admitted-At, the RFC 3339 time at which the client decided to
// send it, is not after the announcement) or is a Violation (admitted
// after it, or without saying when). Stats reports every arrival,
// cooldown and violation, and Transcriptions how often each key was
// transcribed: the evidence that a client respected Retry-After and
// never transcribed a recording twice. Stats.OverLimit, Arrival.OverLimit,
// Stats.MaxInFlightSeen and Stats.OverLimitAfterCooldowns are the evidence
// that it kept to the in-flight limit, also right after a cooldown.
//
// Config.DropAfterAcceptShare accepts and records a submission, calls
// Config.OnAccept, then resets the connection: the client must reconcile
// by key. Note that Go's http.Transport silently resends a POST that
// carries an Idempotency-Key when a reused keep-alive connection fails, so
// the drop surfaces as an error only on a fresh connection; the resend is
// a replay either way.
//
// # What it does not do
//
// It keeps everything in memory and forgets it when the process ends. It
// never fetches http(s) audio (their duration is made up from the digest)
// and reads only the header of file:// audio. It does not check that
// audio_sha256 matches the audio. Asynchronous progress follows
// Config.Clock, lazily: nothing runs in the background, and a stepping
// clock drives it in tests. Trouble is random but reproducible for
// sequential traffic with a seeded Config.Rand. It logs no transcript
// text, audio URLs or whole API keys.
package sttsim
