package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/ledger"
)

// Every row of stt-http/v1's response table, through the pipeline into the
// ledger: the first submission gets the row's answer; later requests get a
// completed transcription, so recoverable rows end validated.
func TestPipelineResponseTable(t *testing.T) {
	t.Parallel()
	type row struct {
		status     int
		retryAfter string
		body       string
		// want: the event that follows the first submission, and the final state.
		wantTo     ledger.State
		wantClass  string
		wantFinal  ledger.State
		wantScoped bool // the scope deadline was extended
	}
	errBody := func(typ string) string { return fmt.Sprintf(`{"error":{"type":%q,"message":"m"}}`, typ) }
	rows := []row{
		{200, "", "", ledger.StateTranscribed, "completed", ledger.StateValidated, false},
		{202, "0", `{"id":"tr_async","status":"queued"}`, ledger.StateSubmitted, "accepted", ledger.StateValidated, false},
		{400, "", errBody("invalid_request"), ledger.StateFailed, "invalid_request", ledger.StateFailed, false},
		{404, "", errBody("not_found"), ledger.StateFailed, "not_found", ledger.StateFailed, false},
		{413, "", errBody("audio_too_large"), ledger.StateFailed, "audio_too_large", ledger.StateFailed, false},
		{415, "", errBody("unsupported_media"), ledger.StateFailed, "unsupported_media", ledger.StateFailed, false},
		{422, "", errBody("idempotency_key_reused"), ledger.StateFailed, "idempotency_key_reused", ledger.StateFailed, false},
		{401, "", errBody("unauthorized"), ledger.StateFailed, "unauthorized", ledger.StateFailed, false},
		{403, "", errBody("forbidden"), ledger.StateFailed, "forbidden", ledger.StateFailed, false},
		{429, "1", errBody("rate_limited"), ledger.StateRetryWait, "rate_limited", ledger.StateValidated, true},
		{429, "", errBody("rate_limited"), ledger.StateRetryWait, "rate_limited", ledger.StateValidated, true},
		{429, "soon", errBody("rate_limited"), ledger.StateRetryWait, "rate_limited", ledger.StateValidated, true},
		{503, "1", errBody("unavailable"), ledger.StateRetryWait, "unavailable", ledger.StateValidated, true},
		{503, "", errBody("unavailable"), ledger.StateRetryWait, "unavailable", ledger.StateValidated, false},
		{500, "", errBody("server_error"), ledger.StateRetryWait, "server_error", ledger.StateValidated, false},
		{502, "", "<html>bad gateway</html>", ledger.StateRetryWait, "server_error", ledger.StateValidated, false},
		{504, "", "", ledger.StateRetryWait, "server_error", ledger.StateValidated, false},
		{200, "", "not json", ledger.StateRetryWait, "bad_response", ledger.StateValidated, false},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%d_%s_%s", r.status, r.retryAfter, r.wantClass), func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			completed := func(w http.ResponseWriter, key string) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				_ = json.NewEncoder(w).Encode(map[string]any{"id": "tr_1", "idempotency_key": key, "status": "completed",
					"text": "the rate sheet goes out Friday", "language": "en", "confidence": 0.9, "duration_seconds": 2.0})
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				key := req.Header.Get("Idempotency-Key")
				if req.Method == http.MethodGet { // poll or reconcile: the transcription is done
					completed(w, key)
					return
				}
				if calls.Add(1) > 1 || (r.status == 200 && r.body == "") {
					completed(w, key)
					return
				}
				if r.retryAfter != "" {
					w.Header().Set("Retry-After", r.retryAfter)
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(r.status)
				_, _ = w.Write([]byte(r.body))
			}))
			defer srv.Close()

			pool := testdb.New(t)
			root := t.TempDir()
			path := filepath.Join(root, "t1/call.wav")
			jobstest.WriteWAV(t, path, 2*time.Second, 5)
			l, _ := ledger.New(pool, nil)
			store, err := audio.Open(context.Background(), audio.Config{URL: "file://" + root})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = store.Close() }()
			p, err := jobs.New(pool, l, jobs.Config{
				Tenants:      map[string]jobs.TenantConfig{"t1": {Provider: "generic-http", BaseURL: srv.URL, APIKey: "k"}},
				PollInterval: 20 * time.Millisecond, ProbeWait: 20 * time.Millisecond,
			}, jobs.Deps{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			client, err := jobstest.NewClient(pool, p, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Ingest(context.Background(), client, jobs.IngestRequest{TenantID: "t1", CallID: "call", Audio: path})
			if err != nil {
				t.Fatal(err)
			}
			// The recording's job ends each run completed or snoozed
			// (waiting for the vendor or the scope), or fails.
			ran, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed,
				river.EventKindJobFailed, river.EventKindJobCancelled)
			defer unsubscribe()
			if err := client.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = client.StopAndCancel(context.Background()) }()
			var rec ledger.Recording
			testwait.Until(30*time.Second, ran, func() bool {
				if rec, err = l.Recording(context.Background(), res.Recording.ID); err != nil {
					t.Fatal(err)
				}
				return rec.State == r.wantFinal
			})
			if rec.State != r.wantFinal {
				t.Fatalf("final state %s, want %s", rec.State, r.wantFinal)
			}
			evs, _ := l.Events(context.Background(), rec.ID)
			var after *ledger.Event
			for i, ev := range evs {
				if ev.New == ledger.StateSubmitted && ev.Prior == ledger.StateEligible {
					after = &evs[i+1]
					break
				}
			}
			if after == nil || after.New != r.wantTo || after.ResponseClass != r.wantClass {
				t.Fatalf("event after the first submission = %+v, want -> %s class %s", after, r.wantTo, r.wantClass)
			}
			if r.retryAfter != "" && r.wantTo == ledger.StateRetryWait && (after.RetryAfter == nil || *after.RetryAfter != r.retryAfter) {
				t.Fatalf("raw Retry-After not recorded: %+v", after.RetryAfter)
			}
			var scoped int
			_ = pool.QueryRow(context.Background(), "SELECT count(*) FROM scope_deferral_extensions").Scan(&scoped)
			if (scoped > 0) != r.wantScoped {
				t.Fatalf("scope extensions: %d, want extended=%v", scoped, r.wantScoped)
			}
			if _, err := ledger.Replay(evs); err != nil {
				t.Fatal(err)
			}
		})
	}
}
