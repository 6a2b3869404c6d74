package connector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// secretURL carries credentials in its user info and query.
const secretURL = "https://crm:hunter2@crm.example.com/hook?sig=SIG&token=SECRET"

// echo answers an error that repeats what it was sent: the Authorization
// header, the token (raw and URL-escaped) and a URL with credentials, in
// the CRM's error shape.
func echo(status int, shape func(msg string) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 512))
		msg := fmt.Sprintf("denied for %s (%s, %s); see %s; body %s",
			r.Header.Get("Authorization"), testToken, url.QueryEscape(testToken), secretURL, body)
		b, _ := json.Marshal(shape(msg))
		answer(status, b)(w, r)
	}
}

var errorShapes = map[string]func(string) any{
	KindWebhook: func(m string) any {
		return map[string]any{"error": map[string]string{"type": "invalid_request", "message": m}}
	},
	KindSalesforce: func(m string) any {
		return []map[string]any{{"message": m, "errorCode": "INVALID_FIELD", "fields": []string{}}}
	},
	KindHubSpot: func(m string) any {
		return map[string]any{"status": "error", "message": m, "correlationId": "c", "category": "VALIDATION_ERROR"}
	},
}

// TestNoSecretsInMessages: whatever a CRM echoes, neither a Message nor an
// error carries the token or a URL's credentials.
func TestNoSecretsInMessages(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, status := range []int{400, 401, 403, 409, 429, 500, 503} {
				f := newFakeCRM(t, echo(status, errorShapes[kind]))
				got, err := f.target(t, kind).Deliver(t.Context(), delivery())
				mustNoErr(t, err)
				if got.Message == "" {
					t.Errorf("HTTP %d: no Message", status)
				}
				assertNoSecrets(t, "Message", got.Message)
				if !strings.Contains(got.Message, "denied for") {
					t.Errorf("HTTP %d: the CRM's message is lost: %q", status, got.Message)
				}
			}
		})
	}
}

// TestNoSecretsInConfig: configuration errors name the field, not the token
// or a URL's credentials, and a Config prints without its token however it
// is printed.
func TestNoSecretsInConfig(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		_, err := New(Config{Kind: kind, BaseURL: secretURL, Token: testToken})
		if err == nil || !strings.Contains(err.Error(), "Config.BaseURL") {
			t.Errorf("%s: %v, want a BaseURL error", kind, err)
			continue
		}
		assertNoSecrets(t, "error", err.Error())
		_, err = New(Config{Kind: kind, BaseURL: "https://crm.example.com", Token: testToken + "\n"})
		if err == nil || !strings.Contains(err.Error(), "Config.Token") {
			t.Errorf("%s: %v, want a Token error", kind, err)
		}
		assertNoSecrets(t, "error", fmt.Sprint(err))
	}
	cfg := Config{Kind: KindWebhook, BaseURL: secretURL, Token: testToken, Production: true}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("target", "config", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), logged.String()} {
		assertNoSecrets(t, "Config", s)
		if !strings.Contains(s, "webhook") || !strings.Contains(s, "crm.example.com") {
			t.Errorf("Config prints as %q", s)
		}
	}
}

func TestScrubber(t *testing.T) {
	t.Parallel()
	s := newScrubber(testToken)
	for in, want := range map[string]string{
		"token " + testToken:                    "token [redacted]",
		"Bearer " + testToken + ".":             "Bearer [redacted].",
		"at " + secretURL + " now":              "at https://[redacted]@crm.example.com/hook?[redacted] now",
		"at https://x.example/a?sig=1 now":      "at https://x.example/a?[redacted] now",
		"no url here":                           "no url here",
		"line\n\tbreaks   folded":               "line breaks folded",
		"escaped " + url.QueryEscape(testToken): "escaped [redacted]",
		"prefix crm-tok!K3Y":                    "prefix crm-tok!K3Y", // a prefix is not the token
	} {
		if got := s.Message(in); got != want {
			t.Errorf("message(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("é", 150) // 300 bytes
	if got := s.Message(long); len(got) != 200 || !strings.HasPrefix(long, got) {
		t.Errorf("truncated to %d bytes: %q", len(got), got)
	}
	if got := s.Message("bad \xff byte"); got != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 → %q", got)
	}
	short := newScrubber("ab") // too short to be told apart from text
	if got := short.Message("about"); got != "about" {
		t.Errorf("a two-byte token scrubbed text: %q", got)
	}
}
