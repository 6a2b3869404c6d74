package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/ledger"
)

// example is what the examples share: a pipeline for tenant "acme" on a
// fresh database, an audio root holding acme/call-1001.wav (2.5s), and an
// insert-only River client (a worker process would run the jobs).
type example struct {
	ledger   *ledger.Ledger
	pipeline *jobs.Pipeline
	client   *river.Client[pgx.Tx]
}

// newExample builds the example's pipeline; cleanup releases all of it.
func newExample() (e example, cleanup func(), err error) {
	pool, drop := testdb.ForExample()
	root, err := os.MkdirTemp("", "callscribe-example-")
	if err != nil {
		drop()
		return e, nil, err
	}
	var store *audio.Store
	cleanup = func() {
		if store != nil {
			_ = store.Close()
		}
		_ = os.RemoveAll(root)
		drop()
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		return e, nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "acme", "call-1001.wav"), jobstest.WAV(2500*time.Millisecond, 7), 0o600); err != nil {
		return e, nil, err
	}
	if e.ledger, err = ledger.New(pool, nil); err != nil {
		return e, nil, err
	}
	if store, err = audio.Open(context.Background(), audio.Config{URL: "file://" + root}); err != nil {
		return e, nil, err
	}
	e.pipeline, err = jobs.New(pool, e.ledger, jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"acme": {Provider: "generic-http", BaseURL: "http://127.0.0.1:8090", APIKey: "sim-key"},
	}}, jobs.Deps{Store: store})
	if err != nil {
		return e, nil, err
	}
	if e.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{}); err != nil {
		return e, nil, err
	}
	return e, cleanup, nil
}

// Ingest records a call's recording, ready for admission (eligible), and
// enqueues the job that will drive it, in one transaction. Ingesting the same recording again converges on
// the same row and enqueues nothing. The example needs the PostgreSQL at
// TEST_DATABASE_URL, like the rest of the suite.
func ExamplePipeline_Ingest() {
	ctx := context.Background()
	e, cleanup, err := newExample()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	req := jobs.IngestRequest{TenantID: "acme", CallID: "call-1001", Audio: "acme/call-1001.wav", Lane: ledger.LaneImmediate}
	res, err := e.pipeline.Ingest(ctx, e.client, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := res.Recording
	fmt.Printf("created=%v job enqueued=%v\n", res.Created, res.JobID != 0)
	fmt.Printf("%s/%s: %s, %s lane, %d bytes, %s of audio\n", rec.TenantID, rec.CallID, rec.State, rec.Lane, rec.AudioBytes, rec.AudioDuration)

	again, err := e.pipeline.Ingest(ctx, e.client, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("again: created=%v job enqueued=%v same recording=%v\n", again.Created, again.JobID != 0, again.Recording.ID == rec.ID)

	_, err = e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "globex", CallID: "call-7", Audio: "acme/call-1001.wav"})
	fmt.Println(err)
	// Output:
	// created=true job enqueued=true
	// acme/call-1001: eligible, immediate lane, 80044 bytes, 2.5s of audio
	// again: created=false job enqueued=false same recording=true
	// unknown tenant "globex" (configured: acme)
}
