package sttsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Bounds of a JSON request body: a single submission, a batch.
const (
	maxBodyBytes      = 1 << 20
	maxBatchBodyBytes = 16 << 20
)

// transcription is one accepted recording. Its fields are guarded by
// Server.mu, except those set before it is shared (id, key, fingerprint,
// req, acceptedAt, readyAt, ready).
type transcription struct {
	id          string
	key         string
	fingerprint [sha256.Size]byte
	req         SubmitRequest
	acceptedAt  time.Time
	readyAt     time.Time     // when it completes or fails, for a client
	ready       chan struct{} // closed once the transcriber has returned
	done        bool          // the transcriber has returned
	result      Result
	failure     *apiError // set when failed
}

// status is t's status at now: processing while the transcriber runs;
// then, until readyAt, queued for the first half of the wait and
// processing for the second; then completed or failed.
func (t *transcription) status(now time.Time) string {
	switch {
	case !t.done:
		return statusProcessing
	case now.Before(t.acceptedAt.Add(t.readyAt.Sub(t.acceptedAt) / 2)):
		return statusQueued
	case now.Before(t.readyAt):
		return statusProcessing
	case t.failure != nil:
		return statusFailed
	default:
		return statusCompleted
	}
}

// submitBody is the body of POST /v1/transcriptions, and (without model)
// of one batch item.
type submitBody struct {
	IdempotencyKey string          `json:"idempotency_key,omitempty"` // batch items only
	AudioURL       string          `json:"audio_url"`
	AudioSHA256    string          `json:"audio_sha256"`
	Model          string          `json:"model,omitempty"`
	Language       string          `json:"language,omitempty"`
	TenantID       string          `json:"tenant_id,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

// readSubmit reads POST /v1/transcriptions as far as its scope. The order
// of the checks is the order a client meets them in: credentials (see
// routeSubmission), Idempotency-Key, a JSON body; then the scope is known
// and throttling applies (a cooldown refuses everything, even a replay);
// then, in submit, the fields, the model, the key's history, and the
// audio.
func (s *Server) readSubmit(r *http.Request, apiKey string) (incoming, *reply) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		rep := errorReply(http.StatusBadRequest, errInvalidRequest, "the Idempotency-Key header is required")
		return incoming{}, &rep
	}
	var in submitBody
	if rep := decodeBody(r, maxBodyBytes, &in); rep != nil {
		return incoming{}, rep
	}
	in.IdempotencyKey = ""
	if in.Model == "" {
		in.Model = ModelDefault
	}
	return incoming{
		scope:    Scope{APIKey: apiKey, Model: in.Model},
		key:      key,
		admitted: r.Header.Get("X-Admitted-At"),
		handle:   func(ctx context.Context) reply { return s.submit(ctx, key, in) },
	}, nil
}

// submit accepts or replays one admitted submission.
func (s *Server) submit(ctx context.Context, key string, in submitBody) reply {
	req, rep := checkRequest(key, in)
	if rep != nil {
		return *rep
	}
	if rep := s.checkModel(req.Model); rep != nil {
		return *rep
	}
	fp := fingerprint(in)
	if t, rep := s.lookup(key, fp); rep != nil || t != nil {
		return s.replay(ctx, t, rep)
	}
	info, rep := s.probe(req.AudioURL)
	if rep != nil {
		return *rep
	}
	req.Audio = info

	s.mu.Lock()
	if t, rep := s.lookupLocked(key, fp); rep != nil || t != nil {
		s.mu.Unlock()
		return s.replay(ctx, t, rep)
	}
	now := s.now()
	readyAt, async := now, s.rng.Chance(s.cfg.AsyncShare)
	if async {
		readyAt = now.Add(s.cfg.ProcessingTime)
	}
	t := s.acceptLocked(key, fp, req, now, readyAt)
	drop := s.rng.Chance(s.cfg.DropAfterAcceptShare)
	s.mu.Unlock()

	s.transcribe(t)
	if s.cfg.OnAccept != nil {
		s.cfg.OnAccept(key)
	}
	var pendingUntil time.Time
	if async {
		pendingUntil = readyAt
	}
	if drop {
		s.dropped(key)
		return reply{drop: true, pendingUntil: pendingUntil}
	}
	if async {
		v := s.view(t)
		v.Status = statusQueued // the first answer of an asynchronous one, whatever the clock says
		return reply{status: http.StatusAccepted, body: v, retryAfter: s.cfg.PollRetryAfter, pendingUntil: pendingUntil}
	}
	return s.answer(t)
}

// decodeBody reads r's JSON body into v, refusing more than limit bytes.
func decodeBody(r *http.Request, limit int64, v any) *reply {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		rep := errorReply(http.StatusBadRequest, errInvalidRequest, "reading the body: %v", err)
		return &rep
	}
	if int64(len(body)) > limit {
		rep := errorReply(http.StatusBadRequest, errInvalidRequest, "the body is larger than %d bytes", limit)
		return &rep
	}
	if err := json.Unmarshal(body, v); err != nil {
		rep := errorReply(http.StatusBadRequest, errInvalidRequest, "the body is not the expected JSON: %v", err)
		return &rep
	}
	return nil
}

// checkRequest validates a submission or a batch item: a missing field is
// 400, a malformed one 422.
func checkRequest(key string, in submitBody) (SubmitRequest, *reply) {
	fail := func(status int, format string, args ...any) (SubmitRequest, *reply) {
		rep := errorReply(status, errInvalidRequest, format, args...)
		return SubmitRequest{}, &rep
	}
	switch {
	case in.AudioURL == "":
		return fail(http.StatusBadRequest, "audio_url is required")
	case in.AudioSHA256 == "":
		return fail(http.StatusBadRequest, "audio_sha256 is required")
	}
	u, err := url.Parse(in.AudioURL)
	if err != nil {
		return fail(http.StatusUnprocessableEntity, "audio_url is not a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "file":
		if u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || (u.Host != "" && u.Host != "localhost") {
			return fail(http.StatusUnprocessableEntity, "audio_url must be file:///absolute/path")
		}
	case "http", "https":
		if u.Host == "" {
			return fail(http.StatusUnprocessableEntity, "audio_url has no host")
		}
	default:
		return fail(http.StatusUnprocessableEntity, "audio_url scheme %q is not file, http or https", u.Scheme)
	}
	if len(in.AudioSHA256) != sha256.Size*2 {
		return fail(http.StatusUnprocessableEntity, "audio_sha256 must be 64 hexadecimal digits")
	}
	if _, err := hex.DecodeString(in.AudioSHA256); err != nil {
		return fail(http.StatusUnprocessableEntity, "audio_sha256 must be 64 hexadecimal digits")
	}
	var metadata json.RawMessage
	if len(in.Metadata) > 0 && !bytes.Equal(in.Metadata, []byte("null")) {
		metadata = in.Metadata
	}
	return SubmitRequest{
		IdempotencyKey: key,
		AudioURL:       in.AudioURL,
		AudioSHA256:    in.AudioSHA256,
		Model:          in.Model,
		Language:       in.Language,
		TenantID:       in.TenantID,
		Metadata:       metadata,
	}, nil
}

// checkModel answers 403 for a model outside Config.Models.
func (s *Server) checkModel(model string) *reply {
	if s.models != nil && !s.models[model] {
		rep := errorReply(http.StatusForbidden, errForbidden, "model %q is not included in this plan", model)
		return &rep
	}
	return nil
}

// fingerprint identifies a submission's content for idempotency: the same
// fields, whatever their order or spacing in the body.
func fingerprint(in submitBody) [sha256.Size]byte {
	in.IdempotencyKey = ""
	if len(in.Metadata) > 0 {
		var m any
		d := json.NewDecoder(bytes.NewReader(in.Metadata))
		d.UseNumber()
		if d.Decode(&m) == nil {
			in.Metadata, _ = json.Marshal(m)
		}
		if bytes.Equal(in.Metadata, []byte("null")) {
			in.Metadata = nil
		}
	}
	b, _ := json.Marshal(in)
	return sha256.Sum256(b)
}

// lookup finds the transcription that key created. A different content
// under the same key is answered 422.
func (s *Server) lookup(key string, fp [sha256.Size]byte) (*transcription, *reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupLocked(key, fp)
}

func (s *Server) lookupLocked(key string, fp [sha256.Size]byte) (*transcription, *reply) {
	t, ok := s.byKey[key]
	switch {
	case !ok:
		return nil, nil
	case t.fingerprint != fp:
		rep := errorReply(http.StatusUnprocessableEntity, errIdempotencyKeyReused,
			"this Idempotency-Key was used for a different request (transcription %s)", t.id)
		return nil, &rep
	}
	s.st.Replays++
	return t, nil
}

// replay answers with what an earlier submission with the same key
// created, once its transcriber has returned, or with rep.
func (s *Server) replay(ctx context.Context, t *transcription, rep *reply) reply {
	if rep != nil {
		return *rep
	}
	select {
	case <-t.ready:
	case <-ctx.Done():
		return reply{abandoned: true}
	}
	return s.answer(t)
}

// probe reads the header of file:// audio: 404 if it cannot be read, 413 if
// larger than Config.MaxAudioBytes, 415 if not WAVE. http(s) audio is not
// fetched.
func (s *Server) probe(audioURL string) (*WAVInfo, *reply) {
	u, _ := url.Parse(audioURL) // checked by checkRequest
	if !strings.EqualFold(u.Scheme, "file") {
		return nil, nil
	}
	fail := func(status int, typ, format string, args ...any) (*WAVInfo, *reply) {
		rep := errorReply(status, typ, format, args...)
		return nil, &rep
	}
	f, err := os.Open(u.Path)
	if err != nil {
		return fail(http.StatusNotFound, errNotFound, "the audio file cannot be read")
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fail(http.StatusNotFound, errNotFound, "the audio file cannot be read")
	}
	if fi.Size() > s.cfg.MaxAudioBytes {
		return fail(http.StatusRequestEntityTooLarge, errAudioTooLarge,
			"the audio is %d bytes, more than the %d this server accepts", fi.Size(), s.cfg.MaxAudioBytes)
	}
	info, err := parseWAV(f, fi.Size())
	if err != nil {
		if errors.Is(err, errNotWAV) {
			return fail(http.StatusUnsupportedMediaType, errUnsupportedMedia, "the audio is not a WAV file this server reads: %v", err)
		}
		return fail(http.StatusNotFound, errNotFound, "the audio file cannot be read")
	}
	return &info, nil
}

// acceptLocked records a new transcription. Callers hold mu and then call
// transcribe.
func (s *Server) acceptLocked(key string, fp [sha256.Size]byte, req SubmitRequest, now, readyAt time.Time) *transcription {
	t := &transcription{
		id:          "tr_" + uuid.NewString(),
		key:         key,
		fingerprint: fp,
		req:         req,
		acceptedAt:  now,
		readyAt:     readyAt,
		ready:       make(chan struct{}),
	}
	s.byID[t.id] = t
	s.byKey[key] = t
	s.st.Accepted++
	s.st.Transcriptions[key]++
	return t
}

// transcribe runs the transcriber for t and records its outcome.
func (s *Server) transcribe(t *transcription) {
	res, err := s.cfg.Transcribe(t.req)
	if err == nil {
		err = res.check()
	}
	if res.Language == "" {
		res.Language = t.req.Language
	}
	if res.Language == "" {
		res.Language = "en"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		t.failure = &apiError{Type: errTranscriptionFailed, Message: err.Error()}
	} else {
		t.result = res
	}
	t.done = true
	close(t.ready)
}

func (s *Server) dropped(key string) {
	s.mu.Lock()
	s.st.Drops++
	s.mu.Unlock()
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "sttsim: dropped the connection after accepting",
		slog.String("idempotency_key", key))
}

// view is t as the wire shows it now.
func (s *Server) view(t *transcription) transcriptionJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	return transcriptionView(t, s.now())
}

// answer is the answer to a submission of t: 200 when completed, 202 while
// queued or processing, 422 transcription_failed when failed.
func (s *Server) answer(t *transcription) reply {
	v := s.view(t)
	switch v.Status {
	case statusCompleted:
		return reply{status: http.StatusOK, body: v}
	case statusFailed:
		return reply{status: http.StatusUnprocessableEntity, body: errorBody{Error: *v.Error}}
	default:
		return reply{status: http.StatusAccepted, body: v, retryAfter: s.cfg.PollRetryAfter}
	}
}
