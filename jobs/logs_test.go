package jobs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// logBuffer is a buffer the pipeline's goroutines write log lines to.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every log line of the pipeline and the outbox about a recording names it
// as `jobs show` does: its recording_id, tenant, call_id, throttling scope
// and River's job_id, the first three as the ledger holds them; and no line
// carries a transcript, an API key or a CRM token.
func TestPipelineLogLinesNameTheirRecording(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var buf logBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Both the vendor and the CRM throttle, surely (fixed seeds), so that
	// the steps log about the recordings.
	e := runToDeliveredWith(t, 6, sttsim.Config{RateLimitShare: 0.5, Cooldown: 100 * time.Millisecond, Rand: rand.New(rand.NewPCG(5, 9))},
		jobs.Config{Logger: logger}, crmsim.Config{RateLimitShare: 0.5, Cooldown: 100 * time.Millisecond, Rand: rand.New(rand.NewPCG(4, 2))})

	recs, err := e.ledger.Recordings(ctx, ledger.RecordingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][2]string{} // recording id -> tenant, call id
	for _, r := range recs {
		byID[r.ID.String()] = [2]string{r.TenantID, r.CallID}
	}
	logs := buf.String()
	for _, secret := range []string{"sim-key", "crm-token", "rate sheet for Chicago"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	about, fromOutbox := 0, 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %d is not JSON: %v: %s", n, err, sc.Text())
		}
		id := ""
		for rid := range byID {
			if strings.Contains(sc.Text(), rid) {
				id = rid
			}
		}
		if id == "" {
			continue // not about one recording (a scope's window, a sweep)
		}
		about++
		if _, ok := line["outbox"]; ok {
			fromOutbox++
		}
		want := map[string]string{"recording_id": id, "tenant": byID[id][0], "call_id": byID[id][1]}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("log line %d (%q): %s = %v, want %q", n, line["msg"], k, line[k], v)
			}
		}
		if s, _ := line["scope"].(string); s == "" {
			t.Errorf("log line %d (%q) names no scope: %s", n, line["msg"], sc.Text())
		}
		// A line of the outbox's prompt try (right after the commit, by no
		// River job) says so instead.
		if j, _ := line["job_id"].(float64); j <= 0 && line["prompt"] != true {
			t.Errorf("log line %d (%q) names no job_id and is no prompt try's: %s", n, line["msg"], sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d log lines about a recording, %d from the outbox", about, fromOutbox)
	if about == 0 || fromOutbox == 0 {
		t.Fatalf("%d log lines about a recording, %d of them from the outbox: the test proves less than it claims\n%s", about, fromOutbox, logs)
	}
}
