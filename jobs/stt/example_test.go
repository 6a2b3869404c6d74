package stt_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/callscribe/callscribe/jobs/stt"
)

// A generic-http provider against a server speaking stt-http/v1: the first
// submission is throttled, the next is accepted, and a poll finds the
// transcript.
func ExampleNewGenericHTTP() {
	submits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch {
		case r.Method == http.MethodPost && submits == 0:
			submits++
			w.Header().Set("Retry-After", "17")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error": {"type": "rate_limited", "message": "too many concurrent requests"}}`)
		case r.Method == http.MethodPost:
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"id": "tr_1", "status": "queued"}`)
		default: // GET /v1/transcriptions/tr_1
			_, _ = io.WriteString(w, `{"id": "tr_1", "status": "completed", "text": "Hi, this is Dana.",
				"language": "en", "confidence": 0.94, "duration_seconds": 41.2,
				"segments": [{"start": 0, "end": 2.4, "text": "Hi, this is Dana.", "confidence": 0.97}]}`)
		}
	}))
	defer srv.Close()

	p, err := stt.New(stt.KindGenericHTTP, stt.Config{BaseURL: srv.URL, APIKey: "key", HTTPClient: srv.Client()})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	req := stt.Request{
		IdempotencyKey: "t1:call-42:9f86d0",
		TenantID:       "t1",
		CallID:         "call-42",
		AudioURL:       "file:///var/recordings/t1/call-42.wav",
	}

	resp, _ := p.Submit(ctx, req)
	fmt.Println(resp.Outcome, resp.Class, resp.HTTPStatus, "Retry-After:", *resp.RetryAfter)

	resp, _ = p.Submit(ctx, req)
	fmt.Println(resp.Outcome, resp.Class, resp.ProviderID, "poll after:", *resp.PollAfter)

	resp, _ = p.Poll(ctx, resp.ProviderID)
	tr := resp.Transcript
	fmt.Println(resp.Outcome, tr.Language, tr.Confidence, tr.DurationSeconds, len(tr.Segments), tr.Text)
	// Output:
	// throttled rate_limited 429 Retry-After: 17
	// pending accepted tr_1 poll after: 2
	// completed en 0.94 41.2 1 Hi, this is Dana.
}

// Every network failure is a Response, not an error: here, nothing listens.
func ExampleProvider_Submit_network() {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()

	p, _ := stt.NewGenericHTTP(stt.Config{BaseURL: base, APIKey: "key"})
	resp, err := p.Submit(context.Background(), stt.Request{IdempotencyKey: "k", AudioURL: "file:///a.wav"})
	fmt.Println(err, resp.Outcome, resp.Class, resp.HTTPStatus)
	// Output:
	// <nil> transient network 0
}
