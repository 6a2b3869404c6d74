package crmsim

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe for a logger used by handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogsCarryNoBodiesOrTokens: cooldowns, conflicts, drops and every
// answer are logged, without the transcript text or the token.
func TestLogsCarryNoBodiesOrTokens(t *testing.T) {
	t.Parallel()
	const token = "tok-SECRET-0123456789"
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	b := setup(t, Config{Tokens: []string{token}, Logger: logger, DropAfterApplyShare: 1})
	client := freshClient()
	t.Cleanup(client.CloseIdleConnections)
	body := goldenBody(t)
	post := func(body []byte, token string) {
		req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/v1/action-sets", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "t1:call-42:1")
		req.Header.Set("X-Delivery-Attempt", "1")
		if resp, err := client.Do(req); err == nil { // the drop is an error
			_ = resp.Body.Close()
		}
	}
	post(body, "wrong")                                                             // 401
	post(body, token)                                                               // applied, dropped
	post(bytes.Replace(body, []byte("2026-12-04"), []byte("2026-12-05"), 1), token) // 409
	auth := header{"Authorization", "Bearer " + token}

	b2 := setup(t, Config{Tokens: []string{token}, Logger: logger, RateLimitShare: 1})
	b2.post(body, auth)

	out := logs.String()
	for _, want := range []string{"cooldown started", "dropped the connection after applying", "idempotency key reused", "crmsim: answered"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{token, "SECRET", "rate sheet for Chicago", "PO-5512"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs carry %q:\n%s", secret, out)
		}
	}
}
