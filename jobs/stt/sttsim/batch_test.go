package sttsim

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// wireBatch is the batch object as stt-http.md writes it.
type wireBatch struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Items  []struct {
		IdempotencyKey  string             `json:"idempotency_key"`
		TranscriptionID *string            `json:"transcription_id"`
		Status          string             `json:"status"`
		Transcription   *wireTranscription `json:"transcription"`
		Error           *apiError          `json:"error"`
	} `json:"items"`
}

// item is body as a batch item under key, without the model.
func item(key string, body map[string]any) map[string]any {
	out := mergeBody(body, "idempotency_key", key)
	delete(out, "model")
	return out
}

func (b *bundle) postBatch(key string, batch map[string]any, headers ...header) (answer, []byte) {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/batches", batch, append([]header{idem(key)}, headers...)...)
}

func TestBatchPartialCompletionAndDedup(t *testing.T) {
	t.Parallel()
	base := DefaultTranscriber(nil)
	var failSHA string
	b := setup(t, Config{ProcessingTime: 4 * time.Second, PollRetryAfter: "2", Transcribe: func(req SubmitRequest) (Result, error) {
		if req.AudioSHA256 == failSHA {
			return Result{}, errors.New("no speech found")
		}
		return base(req)
	}})
	known := b.recording("known.wav", 2)
	fresh := b.recording("fresh.wav", 3)
	failing := b.recording("failing.wav", 1)
	failSHA = failing["audio_sha256"].(string)
	missing := mergeBody(fresh, "audio_url", "file://"+filepath.Join(b.dir, "missing.wav"))

	// "known" was transcribed before, as a single submission.
	resp, data := b.submit("known", known)
	wantStatus(t, resp, data, http.StatusOK)
	knownID := decode[wireTranscription](t, data).ID

	batch := map[string]any{"model": "general", "items": []any{
		item("known", known),
		item("fresh", fresh),
		item("missing", missing),
		item("failing", failing),
		item("known-elsewhere", fresh), // fine: another key for the same audio
		item("reused", failing),        // "reused" is about to be taken by other audio
		item("bad-sha", mergeBody(fresh, "audio_sha256", "abc")),
	}}
	resp, data = b.submit("reused", remoteBody(1))
	wantStatus(t, resp, data, http.StatusOK)

	resp, data = b.postBatch("manifest-1", batch)
	wantStatus(t, resp, data, http.StatusAccepted)
	if resp.Header.Get("Retry-After") != "2" {
		t.Errorf("Retry-After %q, want the PollRetryAfter", resp.Header.Get("Retry-After"))
	}
	got := decode[wireBatch](t, data)
	if got.ID == "" || got.Status != statusProcessing || len(got.Items) != 7 {
		t.Fatalf("batch %s", data)
	}
	type want struct {
		status string
		err    string
		hasID  bool
	}
	check := func(stage string, wants []want) {
		t.Helper()
		for i, w := range wants {
			it := got.Items[i]
			if it.Status != w.status || (it.TranscriptionID != nil) != w.hasID {
				t.Errorf("%s: item %d (%s) %+v, want %+v", stage, i, it.IdempotencyKey, it, w)
				continue
			}
			if (it.Transcription != nil) != (w.status == statusCompleted) {
				t.Errorf("%s: item %d transcription present %v with status %s", stage, i, it.Transcription != nil, w.status)
			}
			if it.Transcription != nil && (it.Transcription.ID != *it.TranscriptionID || it.Transcription.Text == nil) {
				t.Errorf("%s: item %d transcription %+v", stage, i, it.Transcription)
			}
			if (w.err == "") != (it.Error == nil) || (it.Error != nil && it.Error.Type != w.err) {
				t.Errorf("%s: item %d error %+v, want %q", stage, i, it.Error, w.err)
			}
		}
	}
	check("accepted", []want{
		{statusCompleted, "", true},
		{statusQueued, "", true},
		{statusFailed, errNotFound, false},
		{statusQueued, "", true},
		{statusQueued, "", true},
		{statusFailed, errIdempotencyKeyReused, false},
		{statusFailed, errInvalidRequest, false},
	})
	if *got.Items[0].TranscriptionID != knownID {
		t.Errorf("known item refers to %s, want %s", *got.Items[0].TranscriptionID, knownID)
	}

	// Three new items, staggered over 4s: ready at +1.33s, +2.67s, +4s.
	poll := func() {
		t.Helper()
		resp, data := b.do(http.MethodGet, "/v1/batches/"+got.ID, nil)
		wantStatus(t, resp, data, http.StatusOK)
		got = decode[wireBatch](t, data)
	}
	b.clock.Advance(1400 * time.Millisecond)
	poll()
	check("after 1.4s", []want{
		{statusCompleted, "", true},
		{statusCompleted, "", true},
		{statusFailed, errNotFound, false},
		{statusProcessing, "", true},
		{statusQueued, "", true},
		{statusFailed, errIdempotencyKeyReused, false},
		{statusFailed, errInvalidRequest, false},
	})
	if got.Status != statusProcessing {
		t.Errorf("batch status %s", got.Status)
	}
	b.clock.Advance(2600 * time.Millisecond)
	poll()
	check("after 4s", []want{
		{statusCompleted, "", true},
		{statusCompleted, "", true},
		{statusFailed, errNotFound, false},
		{statusFailed, errTranscriptionFailed, true},
		{statusCompleted, "", true},
		{statusFailed, errIdempotencyKeyReused, false},
		{statusFailed, errInvalidRequest, false},
	})
	if got.Status != statusCompleted {
		t.Errorf("partly failed batch status %s, want completed", got.Status)
	}
	if d := *got.Items[1].Transcription.DurationSeconds; d != 3 {
		t.Errorf("fresh item duration %v", d)
	}

	// Replaying the manifest answers the same batch and transcribes nothing.
	resp, data = b.postBatch("manifest-1", batch)
	wantStatus(t, resp, data, http.StatusAccepted)
	if again := decode[wireBatch](t, data); again.ID != got.ID || again.Status != statusCompleted {
		t.Errorf("replay answered %s", data)
	}
	// Items' keys are ordinary keys: reconcile finds them, a single
	// submission replays them.
	resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=fresh", nil)
	wantStatus(t, resp, data, http.StatusOK)
	if tr := decode[wireTranscription](t, data); tr.ID != *got.Items[1].TranscriptionID || tr.Status != statusCompleted {
		t.Errorf("reconcile of an item %s", data)
	}
	resp, data = b.submit("fresh", fresh)
	wantStatus(t, resp, data, http.StatusOK)

	// A second batch with an already-transcribed item does not transcribe it again.
	resp, data = b.postBatch("manifest-2", map[string]any{"items": []any{item("fresh", fresh), item("new", known)}})
	wantStatus(t, resp, data, http.StatusAccepted)
	second := decode[wireBatch](t, data)
	if second.Items[0].Status != statusCompleted || *second.Items[0].TranscriptionID != *got.Items[1].TranscriptionID ||
		second.Items[1].Status != statusQueued {
		t.Errorf("second batch %s", data)
	}

	st := b.sim.Stats()
	for key, n := range map[string]int{"known": 1, "fresh": 1, "failing": 1, "known-elsewhere": 1, "reused": 1, "new": 1, "missing": 0, "bad-sha": 0} {
		if st.Transcriptions[key] != n {
			t.Errorf("%s transcribed %d times, want %d", key, st.Transcriptions[key], n)
		}
	}
	if st.Batches != 3 || st.Accepted != 6 {
		t.Errorf("batches %d, accepted %d", st.Batches, st.Accepted)
	}
}

func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Models: []string{"general"}})
	body := remoteBody(1)
	ok := map[string]any{"items": []any{item("a", body)}}
	cases := []struct {
		name    string
		key     string
		batch   any
		headers []header
		status  int
		typ     string
	}{
		{"no manifest key", "", ok, []header{{"Idempotency-Key", ""}}, 400, errInvalidRequest},
		{"not JSON", "m1", "items: none", nil, 400, errInvalidRequest},
		{"no items", "m2", map[string]any{"items": []any{}}, nil, 400, errInvalidRequest},
		{"item without key", "m3", map[string]any{"items": []any{body}}, nil, 400, errInvalidRequest},
		{"repeated item key", "m4", map[string]any{"items": []any{item("a", body), item("a", body)}}, nil, 422, errInvalidRequest},
		{"model outside the plan", "m5", map[string]any{"model": "medical", "items": []any{item("a", body)}}, nil, 403, errForbidden},
	}
	for _, c := range cases {
		resp, data := b.do(http.MethodPost, "/v1/batches", c.batch, append([]header{idem(c.key)}, c.headers...)...)
		wantError(t, resp, data, c.status, c.typ)
	}
	resp, data := b.do(http.MethodGet, "/v1/batches/b_unknown", nil)
	wantError(t, resp, data, http.StatusNotFound, errNotFound)

	resp, data = b.postBatch("m6", ok)
	wantStatus(t, resp, data, http.StatusAccepted)
	resp, data = b.postBatch("m6", map[string]any{"items": []any{item("b", body)}})
	wantError(t, resp, data, http.StatusUnprocessableEntity, errIdempotencyKeyReused)
	if st := b.sim.Stats(); st.Accepted != 1 || st.Transcriptions["b"] != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestBatchRateLimited checks that a batch is throttled as one submission
// of its scope: it can start a cooldown, and is refused during one.
func TestBatchRateLimited(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{RateLimitShare: 0.5, Rand: rand.New(src)})
	batch := map[string]any{"model": "general", "items": []any{item("a", remoteBody(1))}}

	src.Push(yes)
	resp, data := b.postBatch("m1", batch)
	wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	if resp.Header.Get("Retry-After") != "2" {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	resp, data = b.submit("single", remoteBody(2))
	wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	b.clock.Advance(CooldownDefault)
	src.Push(yes)
	resp, data = b.submit("single", remoteBody(2))
	wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	resp, data = b.postBatch("m1", batch, header{"X-Admitted-At", b.clock.Now().Add(-time.Second).Format(time.RFC3339Nano)})
	wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	// Another model is another scope.
	resp, data = b.postBatch("m2", mergeBody(batch, "model", "phone-call"))
	wantStatus(t, resp, data, http.StatusAccepted)

	st := b.sim.Stats()
	if st.Batches != 3 || st.RateLimited != 4 || len(st.Cooldowns) != 2 || st.Accepted != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(st.Violations) != 1 || st.Violations[0].IdempotencyKey != "single" || st.Violations[0].Batch {
		t.Errorf("violations %+v", st.Violations)
	}
	last := st.Arrivals[len(st.Arrivals)-2]
	if !last.Batch || !last.InFlight || last.Violation {
		t.Errorf("in-flight batch arrival %+v", last)
	}
}
