package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// crmDeliverJobs counts the River jobs that ever delivered (or were to
// deliver) an outbox row.
func crmDeliverJobs(t *testing.T, e *crmEnv) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE kind = 'crm_deliver'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// appliedOnceEach fails t unless the CRM holds n action sets, each applied
// once.
func appliedOnceEach(t *testing.T, st crmsim.Stats, n int) {
	t.Helper()
	if st.Applied != n {
		t.Fatalf("the CRM holds %d action sets, want %d", st.Applied, n)
	}
	for key, k := range st.ApplyCount {
		if k != 1 {
			t.Fatalf("%s applied %d times", key, k)
		}
	}
}

// openScope gives the CRM scope its row before the workers start, as
// every scope has after its first delivery: a prompt try goes on only in
// a scope known to be open.
func openScope(o *envOpts) {
	o.before = func(ctx context.Context, l *ledger.Ledger, scope string) {
		if _, err := l.ScopeAdmit(ctx, scope, 0, time.Second, time.Second); err != nil {
			panic(err)
		}
	}
}

// With a place free for each, every delivery is tried in the process
// right after its commit: no River job delivers any of them, and the CRM
// applies each set once.
func TestPromptDeliveriesTakeNoJob(t *testing.T) {
	t.Parallel()
	const n = 8 // fewer than outbox.PromptDefault: a place is always free
	e := runToDeliveredWith(t, n, sttsim.Config{}, jobs.Config{}, crmsim.Config{}, openScope)
	appliedOnceEach(t, e.crm.Stats(), n)
	if jobs := crmDeliverJobs(t, e); jobs != 0 {
		t.Fatalf("%d delivery jobs for %d prompt deliveries, want 0", jobs, n)
	}
}

// Without prompt tries (Prompt -1), every delivery is a River job's, one
// per row, as before they existed.
func TestNoPromptDeliveriesAreJobs(t *testing.T) {
	t.Parallel()
	const n = 8
	e := runToDeliveredWith(t, n, sttsim.Config{}, jobs.Config{}, crmsim.Config{}, openScope,
		func(o *envOpts) { o.outbox = func(c *outbox.Config) { c.Prompt = -1 } })
	appliedOnceEach(t, e.crm.Stats(), n)
	if jobs := crmDeliverJobs(t, e); jobs != n {
		t.Fatalf("%d delivery jobs for %d rows, want one each", jobs, n)
	}
}

// A scope that is not open (here: throttled by the CRM, deferred, then
// needing its probe) sends its deliveries to River jobs, which wait: every
// set is still applied once.
func TestPromptDeliveriesInAThrottledScopeGoToJobs(t *testing.T) {
	t.Parallel()
	const n = 10
	e := runToDeliveredWith(t, n, sttsim.Config{}, jobs.Config{}, crmsim.Config{RateLimitShare: 0.5, Cooldown: 300 * time.Millisecond}, openScope)
	st := e.crm.Stats()
	appliedOnceEach(t, st, n)
	if st.RateLimited == 0 {
		t.Fatal("the CRM never throttled: the test proves less than it claims")
	}
	if jobs := crmDeliverJobs(t, e); jobs == 0 {
		t.Fatal("no delivery went to a River job although the CRM throttled")
	}
}
