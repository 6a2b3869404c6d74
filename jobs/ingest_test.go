package jobs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// Ids that cannot be stored or sent as they are are refused before
// anything is read or written, naming the field; nothing reaches SQL.
func TestIngestRefusesBadIDs(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{}, jobs.Config{}, 1)
	ctx := context.Background()
	long := strings.Repeat("x", jobs.MaxIDLen+1)
	tests := []struct {
		name  string
		req   jobs.IngestRequest
		field string
	}{
		{"nul call id", jobs.IngestRequest{TenantID: "t1", CallID: "call\x00-1", Audio: files[0]}, "call_id"},
		{"100 KB call id", jobs.IngestRequest{TenantID: "t1", CallID: strings.Repeat("c", 100_000), Audio: files[0]}, "call_id"},
		{"call id one over", jobs.IngestRequest{TenantID: "t1", CallID: long, Audio: files[0]}, "call_id"},
		{"newline call id", jobs.IngestRequest{TenantID: "t1", CallID: "a\nb", Audio: files[0]}, "call_id"},
		{"C1 control", jobs.IngestRequest{TenantID: "t1", CallID: "a\u0085b", Audio: files[0]}, "call_id"},
		{"invalid UTF-8", jobs.IngestRequest{TenantID: "t1", CallID: "a\xffb", Audio: files[0]}, "call_id"},
		{"empty call id", jobs.IngestRequest{TenantID: "t1", Audio: files[0]}, "call_id"},
		{"nul tenant", jobs.IngestRequest{TenantID: "t1\x00", CallID: "c", Audio: files[0]}, "tenant_id"},
		{"long tenant", jobs.IngestRequest{TenantID: long, CallID: "c", Audio: files[0]}, "tenant_id"},
		{"nul model", jobs.IngestRequest{TenantID: "t1", CallID: "c", Audio: files[0], Model: "m\x00"}, "model"},
		{"nul language", jobs.IngestRequest{TenantID: "t1", CallID: "c", Audio: files[0], Language: "e\x00n"}, "language"},
	}
	for _, tt := range tests {
		_, err := e.pipeline.Ingest(ctx, e.client, tt.req)
		var re *jobs.RequestError
		if !errors.As(err, &re) || !errors.Is(err, jobs.ErrInvalidRequest) || re.Field != tt.field {
			t.Errorf("%s: Ingest() error = %v, want a *RequestError for %s", tt.name, err, tt.field)
			continue
		}
		if !strings.HasPrefix(err.Error(), tt.field+": ") || len(err.Error()) > 200 {
			t.Errorf("%s: error %q does not lead with the field, or echoes the id", tt.name, err)
		}
	}
	// The longest id allowed is taken.
	longest := strings.Repeat("y", jobs.MaxIDLen)
	res, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: longest, Audio: files[0]})
	if err != nil || res.Recording.CallID != longest {
		t.Fatalf("Ingest() of a %d-byte call id: %v", jobs.MaxIDLen, err)
	}
	n, err := e.ledger.CountByState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range n {
		total += c
	}
	if total != 1 {
		t.Fatalf("%d recordings stored, want the 1 good one", total)
	}
}

// A FIFO under the recordings root is refused at once; a text file named
// .wav is refused; each error names the key.
func TestIngestRefusesFIFOAndNonWAV(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, sttsim.Config{}, jobs.Config{}, 0)
	if err := os.MkdirAll(filepath.Join(e.root, "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.root, "t1", "pipe.wav"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.root, "t1", "notes.wav"), []byte("minutes of the meeting\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ingest := func(audioPath string) error {
		done := make(chan error, 1)
		go func() {
			_, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: audioPath, Audio: audioPath})
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			t.Fatalf("Ingest(%s) did not return within 5s", audioPath)
			return nil
		}
	}
	err := ingest("t1/pipe.wav")
	var ke *audio.KeyError
	if !errors.As(err, &ke) || ke.Reason != audio.KeyNotRegular || !strings.Contains(err.Error(), `"t1/pipe.wav"`) {
		t.Fatalf("FIFO: Ingest() error = %v, want a not-regular *audio.KeyError naming the key", err)
	}
	err = ingest("t1/notes.wav")
	if !errors.Is(err, audio.ErrFormat) || !strings.Contains(err.Error(), `"t1/notes.wav"`) {
		t.Fatalf("text file named .wav: Ingest() error = %v, want audio.ErrFormat naming the key", err)
	}
}

// A tenant reads only its own part of the recordings root ("<tenant>/"),
// through the CLI's manifest as through the API.
func TestIngestConfinesAudioToTheTenant(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, sttsim.Config{}, jobs.Config{}, 1)
	other := filepath.Join(e.root, "t2", "call.wav")
	jobstest.WriteWAV(t, other, time.Second, 1)
	_, err := e.pipeline.Ingest(context.Background(), e.client, jobs.IngestRequest{TenantID: "t1", CallID: "c", Audio: other})
	var re *jobs.RequestError
	if !errors.As(err, &re) || re.Field != "audio" || !strings.Contains(err.Error(), "t1/...") {
		t.Fatalf("t1 ingesting t2's audio: %v, want a *RequestError for audio", err)
	}
}
