package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
)

type holdArgs struct{}

func (holdArgs) Kind() string { return "metrics_test_hold" }

type holdWorker struct {
	river.WorkerDefaults[holdArgs]
	release chan struct{}
}

func (w *holdWorker) Work(ctx context.Context, _ *river.Job[holdArgs]) error {
	select {
	case <-w.release:
	case <-ctx.Done():
	}
	return nil
}

// Worker occupancy, through a real River client: three jobs held by a
// queue of four workers are 3 busy, occupancy 0.75; once they finish, 0
// busy. The queue's workers are exported from the start.
func TestWorkerOccupancy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	m := metrics.New(metrics.Config{})
	hold := &holdWorker{release: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, hold)
	queues := map[string]river.QueueConfig{"held": {MaxWorkers: 4}}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: queues, Workers: workers, Middleware: []rivertype.Middleware{m.WorkerMiddleware(queues)},
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m)
	if n, ok := value(fams, "callscribe_workers_max", "queue", "held"); !ok || n != 4 {
		t.Fatalf("callscribe_workers_max{queue=held} = %v (%v), want 4 before any job", n, ok)
	}
	if n, ok := value(fams, "callscribe_workers_busy", "queue", "held"); !ok || n != 0 {
		t.Fatalf("callscribe_workers_busy{queue=held} = %v (%v), want 0", n, ok)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stop)
	}()
	for range 3 {
		if _, err := client.Insert(ctx, holdArgs{}, &river.InsertOpts{Queue: "held"}); err != nil {
			t.Fatal(err)
		}
	}
	tick := time.NewTicker(10 * time.Millisecond) // polled: the scrape is the signal
	defer tick.Stop()
	busy := func(want float64) func() bool {
		return func() bool { n, _ := value(scrape(t, m), "callscribe_workers_busy", "queue", "held"); return n == want }
	}
	if !testwait.Until(30*time.Second, tick.C, busy(3)) {
		t.Fatalf("busy never reached 3: %v", scrape(t, m)["callscribe_workers_busy"])
	}
	if r, _ := value(scrape(t, m), "callscribe_worker_occupancy", "queue", "held"); r != 0.75 {
		t.Fatalf("occupancy %v with 3 of 4 busy, want 0.75", r)
	}
	close(hold.release)
	if !testwait.Until(30*time.Second, tick.C, busy(0)) {
		t.Fatalf("busy never fell back to 0: %v", scrape(t, m)["callscribe_workers_busy"])
	}
}
