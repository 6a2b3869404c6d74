package sttsim

import (
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// wireTranscription is the transcription object as stt-http.md writes it.
type wireTranscription struct {
	ID              string   `json:"id"`
	IdempotencyKey  string   `json:"idempotency_key"`
	Status          string   `json:"status"`
	Text            *string  `json:"text"`
	Language        string   `json:"language"`
	Confidence      float64  `json:"confidence"`
	DurationSeconds *float64 `json:"duration_seconds"`
	Segments        []struct {
		Start      float64 `json:"start"`
		End        float64 `json:"end"`
		Text       string  `json:"text"`
		Confidence float64 `json:"confidence"`
	} `json:"segments"`
	Metadata map[string]any `json:"metadata"`
	Error    *apiError      `json:"error"`
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{APIKeys: []string{"key-a", "key-b"}})
	body := remoteBody(1)
	routes := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/transcriptions", body},
		{http.MethodGet, "/v1/transcriptions/tr_x", nil},
		{http.MethodGet, "/v1/transcriptions?idempotency_key=k", nil},
		{http.MethodPost, "/v1/batches", map[string]any{"items": []any{}}},
		{http.MethodGet, "/v1/batches/b_x", nil},
		{http.MethodGet, "/nowhere", nil},
	}
	for _, r := range routes {
		for _, auth := range []header{{"Authorization", ""}, bearer("sim-key"), bearer(""), {"Authorization", "Basic a2V5LWE6"}, {"Authorization", "key-a"}} {
			resp, data := b.do(r.method, r.path, r.body, idem("k1"), auth)
			wantError(t, resp, data, http.StatusUnauthorized, errUnauthorized)
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", r.method, r.path)
			}
		}
	}
	for i, key := range []string{"key-a", "key-b"} {
		resp, data := b.submit("k"+key, remoteBody(byte(i)), bearer(key), header{"Authorization", "bearer " + key})
		wantStatus(t, resp, data, http.StatusOK)
	}
	if st := b.sim.Stats(); st.Submissions != 2 || st.Accepted != 2 {
		t.Errorf("unauthenticated requests were counted: %+v", st)
	}
}

func TestSubmitCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	body := b.recording("call-42.wav", 3)
	resp, data := b.submit("t1:call-42:x", body, header{"X-Request-Id", "attempt-1"})
	wantStatus(t, resp, data, http.StatusOK)

	raw := decode[map[string]any](t, data)
	var fields []string
	for k := range raw {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	want := []string{"confidence", "duration_seconds", "error", "id", "idempotency_key", "language", "metadata", "segments", "status", "text"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
	if raw["error"] != nil {
		t.Errorf("error = %v, want null", raw["error"])
	}

	tr := decode[wireTranscription](t, data)
	if !strings.HasPrefix(tr.ID, "tr_") || tr.IdempotencyKey != "t1:call-42:x" || tr.Status != statusCompleted {
		t.Errorf("transcription %+v", tr)
	}
	if tr.Text == nil || *tr.Text == "" || tr.Language != "en" || tr.Confidence != ConfidenceDefault {
		t.Errorf("content %+v", tr)
	}
	if tr.DurationSeconds == nil || *tr.DurationSeconds != 3 {
		t.Errorf("duration_seconds %v, want 3 (from the WAV header)", tr.DurationSeconds)
	}
	if len(tr.Segments) == 0 || tr.Segments[0].Start != 0 || tr.Segments[len(tr.Segments)-1].End != 3 {
		t.Errorf("segments %+v, want them to span 0..3", tr.Segments)
	}
	var joined []string
	for _, s := range tr.Segments {
		joined = append(joined, s.Text)
	}
	if strings.Join(joined, " ") != *tr.Text {
		t.Errorf("segments %q do not make the text %q", joined, *tr.Text)
	}
	if tr.Metadata["call_id"] != "call-42.wav" {
		t.Errorf("metadata %v not echoed", tr.Metadata)
	}
	if got := b.sim.Transcriptions("t1:call-42:x"); got != 1 {
		t.Errorf("Transcriptions = %d, want 1", got)
	}
}

func TestSubmitExpectedTextAndLanguage(t *testing.T) {
	t.Parallel()
	body := remoteBody(7)
	sha := body["audio_sha256"].(string)
	b := setup(t, Config{ExpectedText: map[string]string{sha: "Please send the rate sheet. Thanks!"}})
	body["language"] = "de"
	resp, data := b.submit("k", body)
	wantStatus(t, resp, data, http.StatusOK)
	tr := decode[wireTranscription](t, data)
	if *tr.Text != "Please send the rate sheet. Thanks!" || tr.Language != "de" || len(tr.Segments) != 2 {
		t.Errorf("got %+v", tr)
	}
	if d := *tr.DurationSeconds; d < 8 || d > 58 {
		t.Errorf("made-up duration %v, want 8..58", d)
	}
	if tr.Metadata != nil {
		t.Errorf("metadata %v, want null", tr.Metadata)
	}
}

func TestSubmitRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Models: []string{"general", "phone-call"}, MaxAudioBytes: 4096})
	good := b.recording("ok.wav", 0.1) // 1,644 bytes
	big := b.recording("big.wav", 1)   // 16,044 bytes
	notWAV := b.file("notes.txt", []byte("these are not the samples you are looking for"))
	truncated := b.file("cut.wav", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 100})[:30])
	if err := os.Mkdir(filepath.Join(b.dir, "dir.wav"), 0o700); err != nil {
		t.Fatal(err)
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	sha := good["audio_sha256"].(string)
	cases := []struct {
		name    string
		body    any
		headers []header
		status  int
		typ     string
	}{
		{"no Idempotency-Key", good, []header{{"Idempotency-Key", ""}}, 400, errInvalidRequest},
		{"not JSON", "audio_url=file:///x", nil, 400, errInvalidRequest},
		{"wrong JSON type", `{"audio_url": 42}`, nil, 400, errInvalidRequest},
		{"trailing garbage", `{"audio_url": "x"} {}`, nil, 400, errInvalidRequest},
		{"no audio_url", with("audio_url", nil), nil, 400, errInvalidRequest},
		{"no audio_sha256", with("audio_sha256", nil), nil, 400, errInvalidRequest},
		{"ftp scheme", with("audio_url", "ftp://host/a.wav"), nil, 422, errInvalidRequest},
		{"no scheme", with("audio_url", "/var/a.wav"), nil, 422, errInvalidRequest},
		{"file with a host", with("audio_url", "file://fileserver/a.wav"), nil, 422, errInvalidRequest},
		{"relative file", with("audio_url", "file:a.wav"), nil, 422, errInvalidRequest},
		{"https without host", with("audio_url", "https:///a.wav"), nil, 422, errInvalidRequest},
		{"short sha", with("audio_sha256", sha[:63]), nil, 422, errInvalidRequest},
		{"non-hex sha", with("audio_sha256", "z"+sha[1:]), nil, 422, errInvalidRequest},
		{"model outside the plan", with("model", "medical"), nil, 403, errForbidden},
		{"missing file", with("audio_url", "file://"+filepath.Join(b.dir, "gone.wav")), nil, 404, errNotFound},
		{"directory", with("audio_url", "file://"+filepath.Join(b.dir, "dir.wav")), nil, 404, errNotFound},
		{"not WAV", notWAV, nil, 415, errUnsupportedMedia},
		{"truncated WAV", truncated, nil, 415, errUnsupportedMedia},
		{"too large", big, nil, 413, errAudioTooLarge},
	}
	for i, c := range cases {
		key := "refused-" + string(rune('a'+i))
		resp, data := b.do(http.MethodPost, "/v1/transcriptions", c.body, append([]header{idem(key)}, c.headers...)...)
		wantError(t, resp, data, c.status, c.typ)
		resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key="+key, nil)
		wantError(t, resp, data, http.StatusNotFound, errNotFound)
	}
	if st := b.sim.Stats(); st.Accepted != 0 || len(st.Transcriptions) != 0 {
		t.Errorf("refused submissions were accepted: %+v", st)
	}
	// A refusal leaves the key free: the corrected submission is accepted.
	resp, data := b.submit("refused-a", good)
	wantStatus(t, resp, data, http.StatusOK)
	resp, data = b.submit("localhost", with("audio_url", strings.Replace(good["audio_url"].(string), "file://", "file://localhost", 1)))
	wantStatus(t, resp, data, http.StatusOK)
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	body := b.recording("a.wav", 2)
	resp, data := b.submit("key-1", body)
	wantStatus(t, resp, data, http.StatusOK)
	first := decode[wireTranscription](t, data)

	// The same content, written differently, is the same request.
	raw := `{"metadata": {"call_id": "a.wav"}, "tenant_id": "t1", "language": "en",
		"model": "general", "audio_sha256": "` + body["audio_sha256"].(string) + `",
		"audio_url": "` + body["audio_url"].(string) + `"}`
	resp, data = b.do(http.MethodPost, "/v1/transcriptions", raw, idem("key-1"))
	wantStatus(t, resp, data, http.StatusOK)
	if again := decode[wireTranscription](t, data); again.ID != first.ID || *again.Text != *first.Text {
		t.Errorf("replay answered %+v, want the original %+v", again, first)
	}

	// The original is kept even when the audio is gone.
	if err := os.Remove(filepath.Join(b.dir, "a.wav")); err != nil {
		t.Fatal(err)
	}
	resp, data = b.submit("key-1", body)
	wantStatus(t, resp, data, http.StatusOK)
	if again := decode[wireTranscription](t, data); again.ID != first.ID {
		t.Errorf("replay after deletion answered %s, want %s", again.ID, first.ID)
	}

	// Other content under the same key is refused and changes nothing.
	for _, change := range []struct{ field, value string }{{"language", "fr"}, {"model", "phone-call"}, {"audio_sha256", strings.Repeat("0", 64)}} {
		other := map[string]any{}
		for k, v := range body {
			other[k] = v
		}
		other[change.field] = change.value
		resp, data = b.submit("key-1", other)
		wantError(t, resp, data, http.StatusUnprocessableEntity, errIdempotencyKeyReused)
	}

	st := b.sim.Stats()
	if st.Accepted != 1 || st.Replays != 2 || st.Transcriptions["key-1"] != 1 || b.sim.Transcriptions("key-1") != 1 {
		t.Errorf("stats %+v, want 1 accepted, 2 replays, transcribed once", st)
	}
}

func TestPollAndReconcile(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	resp, data := b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=k1", nil)
	wantError(t, resp, data, http.StatusNotFound, errNotFound)
	resp, data = b.do(http.MethodGet, "/v1/transcriptions", nil)
	wantError(t, resp, data, http.StatusBadRequest, errInvalidRequest)
	resp, data = b.do(http.MethodGet, "/v1/transcriptions/tr_unknown", nil)
	wantError(t, resp, data, http.StatusNotFound, errNotFound)

	resp, data = b.submit("k1", remoteBody(3))
	wantStatus(t, resp, data, http.StatusOK)
	created := decode[wireTranscription](t, data)

	resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=k1", nil)
	wantStatus(t, resp, data, http.StatusOK)
	if got := decode[wireTranscription](t, data); got.ID != created.ID || got.Status != statusCompleted {
		t.Errorf("reconcile answered %+v", got)
	}
	resp, data = b.do(http.MethodGet, "/v1/transcriptions/"+created.ID, nil)
	wantStatus(t, resp, data, http.StatusOK)
	if got := decode[wireTranscription](t, data); got.ID != created.ID || *got.Text != *created.Text {
		t.Errorf("poll answered %+v", got)
	}
	if resp.Header.Get("Retry-After") != "" {
		t.Errorf("a finished transcription carries Retry-After %q", resp.Header.Get("Retry-After"))
	}
	st := b.sim.Stats()
	if st.Polls != 2 || st.Reconciles != 3 || st.Submissions != 1 {
		t.Errorf("stats %+v, want 2 polls, 3 reconciles, 1 submission", st)
	}
}

func TestAsyncCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AsyncShare: 1, ProcessingTime: 10 * time.Second, PollRetryAfter: "1"})
	resp, data := b.submit("k1", b.recording("a.wav", 1))
	wantStatus(t, resp, data, http.StatusAccepted)
	tr := decode[wireTranscription](t, data)
	if tr.Status != statusQueued || tr.Text != nil || tr.DurationSeconds != nil || tr.Segments != nil || tr.Error != nil {
		t.Errorf("202 answered %s", data)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want the PollRetryAfter", ra)
	}

	steps := []struct {
		advance    time.Duration
		status     string
		retryAfter string
	}{
		{time.Second, statusQueued, "1"},
		{5 * time.Second, statusProcessing, "1"},   // t+6s
		{4*time.Second - 1, statusProcessing, "1"}, // t+10s-1ns
		{1, statusCompleted, ""},                   // t+10s
		{time.Hour, statusCompleted, ""},
	}
	for _, s := range steps {
		b.clock.Advance(s.advance)
		for _, path := range []string{"/v1/transcriptions/" + tr.ID, "/v1/transcriptions?idempotency_key=k1"} {
			resp, data = b.do(http.MethodGet, path, nil)
			wantStatus(t, resp, data, http.StatusOK)
			got := decode[wireTranscription](t, data)
			if got.Status != s.status || resp.Header.Get("Retry-After") != s.retryAfter {
				t.Fatalf("at %v: %s answered %s with Retry-After %q, want %s and %q",
					b.clock.Now().Sub(epoch), path, got.Status, resp.Header.Get("Retry-After"), s.status, s.retryAfter)
			}
			if (got.Text != nil) != (s.status == statusCompleted) {
				t.Errorf("status %s with text %v", got.Status, got.Text)
			}
		}
	}
	// A replay of a finished asynchronous transcription is a 200.
	resp, data = b.submit("k1", b.recording("a.wav", 1))
	wantStatus(t, resp, data, http.StatusOK)
	if got := decode[wireTranscription](t, data); got.ID != tr.ID || b.sim.Transcriptions("k1") != 1 {
		t.Errorf("replay %+v, transcribed %d times", got, b.sim.Transcriptions("k1"))
	}
}

func TestAsyncReplayWhileQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AsyncShare: 1, ProcessingTime: time.Minute})
	resp, data := b.submit("k1", remoteBody(1))
	wantStatus(t, resp, data, http.StatusAccepted)
	first := decode[wireTranscription](t, data)
	resp, data = b.submit("k1", remoteBody(1))
	wantStatus(t, resp, data, http.StatusAccepted)
	if again := decode[wireTranscription](t, data); again.ID != first.ID || again.Status != statusQueued {
		t.Errorf("replay while queued answered %+v", again)
	}
}

func TestTranscriberFailure(t *testing.T) {
	t.Parallel()
	bad := remoteBody(9)
	base := DefaultTranscriber(nil)
	b := setup(t, Config{Transcribe: func(req SubmitRequest) (Result, error) {
		if req.AudioSHA256 == bad["audio_sha256"] {
			return Result{}, errors.New("decoder: corrupt frame at 00:12")
		}
		return base(req)
	}})
	resp, data := b.submit("bad", bad)
	wantError(t, resp, data, http.StatusUnprocessableEntity, errTranscriptionFailed)
	resp, data = b.submit("bad", bad) // the original result, again
	wantError(t, resp, data, http.StatusUnprocessableEntity, errTranscriptionFailed)

	resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=bad", nil)
	wantStatus(t, resp, data, http.StatusOK)
	tr := decode[wireTranscription](t, data)
	if tr.Status != statusFailed || tr.Text != nil || tr.Error == nil || tr.Error.Type != errTranscriptionFailed ||
		!strings.Contains(tr.Error.Message, "corrupt frame") {
		t.Errorf("failed transcription %s", data)
	}
	if n := b.sim.Transcriptions("bad"); n != 1 {
		t.Errorf("transcribed %d times, want 1", n)
	}
}

func TestNonFiniteResultFails(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Transcribe: func(SubmitRequest) (Result, error) {
		return Result{Text: "x", Confidence: math.NaN()}, nil
	}})
	resp, data := b.submit("k", remoteBody(1))
	wantError(t, resp, data, http.StatusUnprocessableEntity, errTranscriptionFailed)
}

func TestServerErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ServerErrorShare: 1})
	seen := map[int]bool{}
	for i := 0; i < 60 && len(seen) < 3; i++ {
		resp, data := b.submit("k", remoteBody(1))
		wantError(t, resp, data, resp.StatusCode, errServerError)
		seen[resp.StatusCode] = true
	}
	if !seen[500] || !seen[502] || !seen[504] || len(seen) != 3 {
		t.Errorf("statuses %v, want 500, 502 and 504", seen)
	}
	resp, data := b.do(http.MethodGet, "/v1/transcriptions/tr_x", nil)
	wantError(t, resp, data, resp.StatusCode, errServerError)
	resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=k", nil)
	wantError(t, resp, data, resp.StatusCode, errServerError)
	st := b.sim.Stats()
	if st.Accepted != 0 || st.ServerErrors != st.Submissions+2 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnroutedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/", 404, ""},
		{http.MethodGet, "/v2/transcriptions", 404, ""},
		{http.MethodGet, "/v1/transcriptions/", 404, ""},
		{http.MethodGet, "/v1/transcriptions/a/b", 404, ""},
		{http.MethodPut, "/v1/transcriptions", 405, "GET, POST"},
		{http.MethodDelete, "/v1/transcriptions/tr_1", 405, "GET"},
		{http.MethodGet, "/v1/batches", 405, "POST"},
		{http.MethodPost, "/v1/batches/b_1", 405, "GET"},
	}
	for _, c := range cases {
		resp, data := b.do(c.method, c.path, nil)
		typ := errNotFound
		if c.status == 405 {
			typ = errInvalidRequest
		}
		wantError(t, resp, data, c.status, typ)
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
}
