package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
)

// noopArgs is a bare River job for the baseline.
type noopArgs struct{ N int }

func (noopArgs) Kind() string { return "noop" }

// BenchmarkIngestManifest measures `callscribe ingest --manifest` of b.N
// local quarter-second WAV files (4 KB each, benchWAV) into a fresh database, in
// recordings/s, and in the same run River's InsertMany of b.N bare jobs in
// chunks of the same size (jobs/s): the ratio is what a recording's
// digest, row, two events and unique job cost against a bare job.
//
//	go run ./internal/cmd/testenv -- go test -run '^$' -bench IngestManifest -benchtime 10000x ./cmd/callscribe/cli/
func BenchmarkIngestManifest(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	root := filepath.Join(dir, "recordings")
	if err := os.MkdirAll(filepath.Join(root, "bench"), 0o755); err != nil {
		b.Fatal(err)
	}
	var manifest strings.Builder
	for i := range b.N {
		rel := fmt.Sprintf("bench/call-%06d.wav", i)
		if err := os.WriteFile(filepath.Join(root, rel), benchWAV(i), 0o600); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&manifest, `{"tenant_id":"bench","call_id":"call-%06d","audio":%q}`+"\n", i, rel)
	}
	path := filepath.Join(dir, "manifest.jsonl")
	if err := os.WriteFile(path, []byte(manifest.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	config := filepath.Join(dir, "callscribe.yaml")
	body := "audio:\n  root: " + root + "\npipeline:\n  tenants:\n" +
		"    bench: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	pool := testdb.New(b)
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(b, pool)}

	b.ResetTimer()
	start := time.Now()
	var stdout, stderr syncBuffer
	code := cli.Run(ctx, []string{"--config", config, "ingest", "--manifest", path}, cli.Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(env)})
	ingest := time.Since(start)
	b.StopTimer()
	if want := fmt.Sprintf("%d ingested, 0 already known, 0 bad lines", b.N); code != 0 || !strings.Contains(stdout.String(), want) {
		b.Fatalf("ingest: %d %q\n%.2000s", code, stdout.String(), stderr.String())
	}

	// The baseline: bare jobs, InsertMany per chunk, on a fresh database.
	rpool := testdb.New(b)
	client, err := river.NewClient(riverpgxv5.New(rpool), &river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, 0, jobs.MaxIngestChunk)
	start = time.Now()
	for lo := 0; lo < b.N; lo += jobs.MaxIngestChunk {
		params = params[:0]
		for i := lo; i < min(lo+jobs.MaxIngestChunk, b.N); i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{N: i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	bare := time.Since(start)

	rate, jobRate := float64(b.N)/ingest.Seconds(), float64(b.N)/bare.Seconds()
	b.ReportMetric(rate, "recordings/s")
	b.ReportMetric(jobRate, "jobs/s")
	b.ReportMetric(rate/jobRate, "x_river")
	b.ReportMetric(0, "ns/op")
}
