package metrics_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/internal/testdb"
)

// queryCounter counts the statements sent on a pool's connections.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// scrapeQueries is how many statements a scrape of the database's gauges
// sends: one per family (oldest eligible by lane, scopes, the outbox's
// backlog, River's queue depths, the duplicate-key counter, the batch
// lane).
const scrapeQueries = 6

// A scrape reads the database's gauges as the runtime role, the binary's,
// in one statement per family of gauges.
func TestScrapeQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testdb.AsRuntime(t, testdb.New(t)).Config()
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := metrics.New(metrics.Config{Pool: pool})
	scrape(t, m) // connects: the role's session set-up is not the scrape's
	counter.n.Store(0)
	fams := scrape(t, m)
	if v, ok := value(fams, "callscribe_scrape_errors_total", "source", "database"); ok && v != 0 {
		t.Fatalf("the runtime role's scrape failed %v times", v)
	}
	// (River's queue depths have no series while River knows no queue.)
	for _, name := range []string{"callscribe_oldest_eligible_age_seconds", "callscribe_scope_cooldowns_active", "callscribe_outbox_backlog",
		"callscribe_duplicate_key_conflicts_total", "callscribe_batch_partial_completions"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s not served", name)
		}
	}
	if n := counter.n.Load(); n != scrapeQueries {
		t.Errorf("a scrape sent %d statements, want %d (one per family of gauges)", n, scrapeQueries)
	}
}
