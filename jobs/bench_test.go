package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

type noopArgs struct{ N int }

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done chan struct{}
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.done <- struct{}{}
	return nil
}

// BenchmarkPipeline measures recordings per second from received to
// validated against a zero-latency simulator, 20 batch workers, the
// recordings ingested before the clock starts (ns/op is per recording).
// BenchmarkRiverNoop measures River at its best, matched (20 workers, the
// same fetch settings, jobs inserted with InsertMany before the clock): the
// ratio of their ns/op is the pipeline's cost per recording in River jobs.
//
//	make bench  (or: go run ./internal/cmd/testenv -- go test -run '^$' -bench 'Pipeline|RiverNoop' -benchtime 1000x ./jobs/)
func BenchmarkPipeline(b *testing.B) {
	e, files := setup(b, sttsim.Config{}, jobs.Config{BatchWorkers: 20}, b.N)
	ctx := context.Background()
	for i, f := range files {
		if _, err := e.pipeline.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%03d", i), Audio: f}); err != nil {
			b.Fatal(err)
		}
	}
	before := xactCommits(b, e.pool)
	b.ResetTimer()
	// A recording's job completes when it is validated.
	completed, unsubscribe := e.client.Subscribe(river.EventKindJobCompleted)
	defer unsubscribe()
	if err := e.client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var counts map[ledger.State]int
	validated := func() bool {
		var err error
		if counts, err = e.ledger.CountByState(ctx); err != nil {
			b.Fatal(err)
		}
		return counts[ledger.StateValidated] == len(files)
	}
	if !testwait.Until(10*time.Minute, completed, validated) {
		b.Fatalf("recordings %v after 10 minutes, want all %d validated", counts, len(files))
	}
	b.StopTimer()
	_ = e.client.StopAndCancel(ctx)
	b.ReportMetric(float64(xactCommits(b, e.pool)-before)/float64(len(files)), "db-commits/recording")
}

// xactCommits reads the database's committed transactions (every
// statement outside a transaction counts as one), after waiting for the
// statistics collector, which reports with a delay of up to a second.
func xactCommits(b *testing.B, pool *pgxpool.Pool) int64 {
	time.Sleep(1500 * time.Millisecond)
	var n int64
	if err := pool.QueryRow(context.Background(), "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRiverNoop is River at its best on the same machine and
// database server, the pipeline's baseline: the jobs inserted with one
// InsertMany before the clock starts, 20 workers (the pipeline's batch
// workers), the pipeline's fetch settings; timed from Start to the last
// job completed. ns/op is per job.
func BenchmarkRiverNoop(b *testing.B) {
	pool := testdb.New(b)
	ctx := context.Background()
	w := &noopWorker{done: make(chan struct{}, b.N)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
		Workers:       workers,
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, b.N)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{N: i}}
	}
	for start := 0; start < len(params); start += 1000 {
		if _, err := client.InsertMany(ctx, params[start:min(start+1000, len(params))]); err != nil {
			b.Fatal(err)
		}
	}
	before := xactCommits(b, pool)
	b.ResetTimer()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		<-w.done
	}
	b.StopTimer()
	_ = client.StopAndCancel(ctx)
	b.ReportMetric(float64(xactCommits(b, pool)-before)/float64(b.N), "db-commits/job")
}
