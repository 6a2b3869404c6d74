package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/ledger"
)

func TestIngestConvergesOnBusinessKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	n := newRecording()
	n.Deadline = time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.UTC)

	first, err := b.ledger.Ingest(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.CallIDReused {
		t.Fatalf("first ingest: Created=%v CallIDReused=%v, want true, false", first.Created, first.CallIDReused)
	}
	r := first.Recording
	if r.State != ledger.StateReceived || r.Attempt != 0 || r.EventSeq != 1 {
		t.Fatalf("new recording = %+v", r)
	}
	if want := ledger.BusinessKey(n.TenantID, n.CallID, n.AudioSHA256); r.BusinessKey != want {
		t.Fatalf("business key %q, want %q", r.BusinessKey, want)
	}
	if !r.Deadline.Equal(n.Deadline.Truncate(time.Microsecond)) {
		t.Fatalf("deadline %v, want %v", r.Deadline, n.Deadline)
	}

	// The same recording again, even with an upper-case digest: same row.
	again := n
	again.AudioSHA256 = strings.ToUpper(n.AudioSHA256)
	second, err := b.ledger.Ingest(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if second.Created || second.Recording.ID != r.ID {
		t.Fatalf("second ingest: Created=%v id=%s, want existing %s", second.Created, second.Recording.ID, r.ID)
	}
	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events after two ingests = %d, %v; want 1", len(evs), err)
	}
	if evs[0].Prior != "" || evs[0].New != ledger.StateReceived || evs[0].Detail["call_id_reused"] != nil {
		t.Fatalf("first event = %+v", evs[0])
	}

	byKey, err := b.ledger.RecordingByKey(ctx, n.TenantID, n.CallID, n.AudioSHA256)
	if err != nil || byKey.ID != r.ID {
		t.Fatalf("RecordingByKey = %v, %v", byKey.ID, err)
	}
}

func TestIngestSameCallNewDigestIsFlagged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	n := newRecording()
	first, err := b.ledger.Ingest(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	n2 := n
	n2.AudioSHA256 = digest("re-recorded")
	second, err := b.ledger.Ingest(ctx, n2)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Created || !second.CallIDReused || second.Recording.ID == first.Recording.ID {
		t.Fatalf("second digest: %+v", second)
	}
	if len(second.EarlierRecordings) != 1 || second.EarlierRecordings[0] != first.Recording.ID {
		t.Fatalf("EarlierRecordings = %v, want [%s]", second.EarlierRecordings, first.Recording.ID)
	}
	evs, err := b.ledger.Events(ctx, second.Recording.ID)
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Detail["call_id_reused"] != true || !strings.Contains(evs[0].Reason, "different audio digest") {
		t.Fatalf("first event of the second digest is not flagged: %+v", evs[0])
	}
	// Both recordings are kept.
	for _, id := range []any{first.Recording.ID, second.Recording.ID} {
		var n int
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM recordings WHERE id = $1", id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("recording %v kept: %d, %v", id, n, err)
		}
	}
}

func TestIngestRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name  string
		edit  func(*ledger.NewRecording)
		field string
	}{
		{"no tenant", func(n *ledger.NewRecording) { n.TenantID = "" }, "TenantID"},
		{"colon in tenant", func(n *ledger.NewRecording) { n.TenantID = "a:b" }, "TenantID"},
		{"no call", func(n *ledger.NewRecording) { n.CallID = "" }, "CallID"},
		{"short digest", func(n *ledger.NewRecording) { n.AudioSHA256 = "abc" }, "AudioSHA256"},
		{"non-hex digest", func(n *ledger.NewRecording) { n.AudioSHA256 = strings.Repeat("z", 64) }, "AudioSHA256"},
		{"bad lane", func(n *ledger.NewRecording) { n.Lane = "urgent" }, "Lane"},
		{"negative size", func(n *ledger.NewRecording) { n.AudioBytes = -1 }, "AudioBytes"},
	}
	for _, tt := range tests {
		n := newRecording()
		tt.edit(&n)
		_, err := b.ledger.Ingest(context.Background(), n)
		var ie *ledger.InvalidError
		if !errors.As(err, &ie) || ie.Field != tt.field || !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: err = %v, want InvalidError on %s", tt.name, err, tt.field)
		}
	}
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM recordings").Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused ingests wrote %d rows (%v)", n, err)
	}
}

// Many workers ingest the same recording, and other digests of the same
// call, at once: one row per digest, and every digest after the first is
// flagged.
func TestIngestConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	n := newRecording()
	const workers = 16
	var wg sync.WaitGroup
	created := make([]bool, workers)
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			m := n
			if i%2 == 1 {
				m.AudioSHA256 = digest("other")
			}
			res, err := b.ledger.Ingest(ctx, m)
			created[i], errs[i] = res.Created, err
		})
	}
	wg.Wait()
	nCreated := 0
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v", i, errs[i])
		}
		if created[i] {
			nCreated++
		}
	}
	if nCreated != 2 {
		t.Fatalf("%d ingests created a row, want 2 (one per digest)", nCreated)
	}
	var flagged int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM recording_events e JOIN recordings r ON r.id = e.recording_id
		WHERE r.call_id = $1 AND e.detail ? 'call_id_reused'`, n.CallID).Scan(&flagged); err != nil {
		t.Fatal(err)
	}
	if flagged != 1 {
		t.Fatalf("%d first events flagged, want exactly 1 (the later digest)", flagged)
	}
}

// The audio's duration is kept in whole milliseconds; zero and NULL (a row
// from before the column existed) both read back as unknown (0).
func TestIngestKeepsAudioDuration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	n := newRecording()
	n.AudioDuration = 61*time.Second + 250*time.Millisecond + 999*time.Microsecond
	res, err := b.ledger.Ingest(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Recording.AudioDuration, 61250*time.Millisecond; got != want {
		t.Fatalf("ingested duration = %s, want %s", got, want)
	}
	if r, err := b.ledger.Recording(ctx, res.Recording.ID); err != nil || r.AudioDuration != 61250*time.Millisecond {
		t.Fatalf("read back duration = %s, %v", r.AudioDuration, err)
	}
	var ms *int64
	if err := b.pool.QueryRow(ctx, "SELECT audio_duration_ms FROM recordings WHERE id = $1", res.Recording.ID).Scan(&ms); err != nil || ms == nil || *ms != 61250 {
		t.Fatalf("stored audio_duration_ms = %v, %v; want 61250", ms, err)
	}

	unknown, err := b.ledger.Ingest(ctx, newRecording())
	if err != nil || unknown.Recording.AudioDuration != 0 {
		t.Fatalf("ingest without a duration = %s, %v; want 0", unknown.Recording.AudioDuration, err)
	}
	if err := b.pool.QueryRow(ctx, "SELECT audio_duration_ms FROM recordings WHERE id = $1", unknown.Recording.ID).Scan(&ms); err != nil || ms != nil {
		t.Fatalf("stored audio_duration_ms = %v, %v; want NULL", ms, err)
	}

	neg := newRecording()
	neg.AudioDuration = -time.Second
	if _, err := b.ledger.Ingest(ctx, neg); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("negative duration: %v, want ErrInvalid", err)
	}
}
