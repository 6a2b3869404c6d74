package stt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// secretAudioURL is a presigned URL with credentials in its user info and
// query.
const secretAudioURL = "https://rec:hunter2@recordings.example.com/t1/call-42.wav?X-Amz-Credential=AKIASECRET&X-Amz-Signature=SECRETSIG"

// echo answers an error that repeats everything it was sent: the
// Authorization header, the request body, the audio URL, in the vendor's
// error shape.
func echo(status int, shape func(msg string) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		msg := fmt.Sprintf("denied for %s (%s); fetching %s; also %s; body %s",
			r.Header.Get("Authorization"), testKey, secretAudioURL,
			strings.ReplaceAll(secretAudioURL, "&", "&amp;"), body)
		b, _ := json.Marshal(shape(msg))
		answer(status, b)(w, r)
	}
}

var errorShapes = map[string]func(string) any{
	KindGenericHTTP: func(m string) any {
		return map[string]any{"error": map[string]string{"type": "invalid_request", "message": m}}
	},
	KindOpenAI: func(m string) any {
		return map[string]any{"error": map[string]any{"message": m, "type": "invalid_request_error", "code": nil}}
	},
	KindDeepgram: func(m string) any {
		return map[string]string{"err_code": "Bad Request", "err_msg": m, "request_id": "r"}
	},
	KindAssemblyAI: func(m string) any { return map[string]string{"error": m} },
}

// secretRequest carries the secret URL, and audio for the uploaders.
func secretRequest() Request {
	open, _ := audioFrom(wavBytes)
	return Request{
		IdempotencyKey: "t1:call-42:9f86d0", TenantID: "t1", CallID: "call-42",
		AudioURL: secretAudioURL, OpenAudio: open, AudioName: "call-42.wav",
	}
}

// TestNoSecretsInMessagesOrErrors: whatever a vendor echoes, and however
// the network or the audio fails, neither a Message nor an error carries
// the API key, the audio URL's query or its password.
func TestNoSecretsInMessagesOrErrors(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, status := range []int{400, 401, 429, 500, 503} {
				v := newVendor(t, echo(status, errorShapes[kind]))
				p, err := New(kind, v.config())
				mustNoErr(t, err)
				got, err := p.Submit(t.Context(), secretRequest())
				mustNoErr(t, err)
				if got.Message == "" {
					t.Errorf("HTTP %d: no Message", status)
				}
				assertNoSecrets(t, "Message", got.Message)
				if strings.Contains(got.Message, "SECRET") {
					t.Errorf("HTTP %d: Message %q", status, got.Message)
				}
			}

			// A network failure.
			v := newVendor(t, resetConnection(t))
			p, err := New(kind, v.config())
			mustNoErr(t, err)
			got, err := p.Submit(t.Context(), secretRequest())
			mustNoErr(t, err)
			assertNoSecrets(t, "Message", got.Message)

			// The audio source fails with an error that names the URL.
			if kind == KindGenericHTTP {
				return // generic-http never opens the audio
			}
			req := secretRequest()
			req.AudioURL = "file:///var/recordings/t1/call-42.wav?token=SECRETSIG" // so every uploader opens it
			req.OpenAudio = func(context.Context) (io.ReadCloser, error) {
				return nil, fmt.Errorf("GET %s: 403 (key %s)", secretAudioURL, testKey)
			}
			_, err = p.Submit(t.Context(), req)
			if !errors.Is(err, ErrAudioUnreadable) {
				t.Fatalf("err = %v, want ErrAudioUnreadable", err)
			}
			assertNoSecrets(t, "error", err.Error())
			req.OpenAudio = failingAudio(wavBytes[:8], fmt.Errorf("read %s: connection reset", secretAudioURL))
			_, err = p.Submit(t.Context(), req)
			if !errors.Is(err, ErrAudioUnreadable) {
				t.Fatalf("err = %v, want ErrAudioUnreadable", err)
			}
			assertNoSecrets(t, "error", err.Error())
		})
	}
}

// TestNoSecretsInConfigErrors: configuration errors name the field, not
// the key or a URL's credentials.
func TestNoSecretsInConfigErrors(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		_, err := New(kind, Config{BaseURL: "https://rec:hunter2@stt.example.com?token=SECRETSIG", APIKey: testKey})
		if err == nil || !strings.Contains(err.Error(), "BaseURL") {
			t.Errorf("%s: %v, want a BaseURL error", kind, err)
			continue
		}
		assertNoSecrets(t, "error", err.Error())
	}
}

func TestScrubber(t *testing.T) {
	t.Parallel()
	s := newScrubber(testKey, secretAudioURL)
	for in, want := range map[string]string{
		"key " + testKey:                       "key [redacted]",
		"at " + secretAudioURL + ".":           "at [redacted].",
		"at https://x.example/a.wav?sig=1 now": "at https://x.example/a.wav?[redacted] now",
		"at https://u:p@x.example/a now":       "at https://[redacted]@x.example/a now",
		"at s3://bucket/key#frag":              "at s3://bucket/key?[redacted]",
		"no url here":                          "no url here",
		"line\n\tbreaks   folded":              "line breaks folded",
	} {
		if got := s.Message(in); got != want {
			t.Errorf("message(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("é", 150) // 300 bytes
	got := s.Message(long)
	if len(got) > MessageMaxBytes || !strings.HasPrefix(long, got) || len(got) != 200 {
		t.Errorf("truncated to %d bytes: %q", len(got), got)
	}
	if got := s.Message("bad \xff byte"); got != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 → %q", got)
	}
}
