package outbox_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// windowed is a bundle whose dispatcher takes slots of its CRM scopes'
// windows in the real Redis. Everything reads the system clock: the
// window reads Redis's.
type windowed struct {
	*bundle
	win *capacity.Windows
	// ended fires whenever a job ends a run (completed, snoozed, failed,
	// cancelled).
	ended <-chan *river.Event
}

func setupWindowed(t *testing.T, wcfg capacity.WindowConfig, dests map[string]outbox.Destination, workers int) *windowed {
	t.Helper()
	pool := testdb.New(t)
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	rdb := testredis.Client(t)
	win, err := capacity.NewWindows(capRedis(t, rdb, testredis.Prefix(t, rdb, "outbox-window")), wcfg)
	if err != nil {
		t.Fatal(err)
	}
	o := mustOutbox(t, outbox.Config{Destinations: dests, Workers: workers, ProbeWait: 50 * time.Millisecond, Window: win}, pool, l)
	w := river.NewWorkers()
	o.AddWorkers(w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: w, Queues: o.Queues(),
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ended, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed,
		river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(unsubscribe)
	return &windowed{bundle: &bundle{pool: pool, ledger: l, outbox: o, client: client}, win: win, ended: ended}
}

func (c *windowed) start(t *testing.T) {
	t.Helper()
	if err := c.client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.client.StopAndCancel(context.Background()) })
}

// delivered reports whether every row of ids is delivered.
func (c *windowed) delivered(t *testing.T, ids []int64) bool {
	t.Helper()
	for _, id := range ids {
		r, err := c.outbox.RowByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == outbox.StateDead {
			t.Fatalf("row %d is dead: %+v", id, r)
		}
		if r.State != outbox.StateDelivered {
			return false
		}
	}
	return true
}

// counting wraps h and records the most requests it ever served at once.
func counting(h http.Handler, peak *atomic.Int64) http.Handler {
	var inFlight atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		h.ServeHTTP(w, r)
	})
}

// 40 deliveries to one CRM scope, ten workers, a window of two, and a CRM
// that throttles one delivery in ten (each 429 a one-second cooldown; the
// seed makes the fourth delivery it draws for the first 429): the CRM
// never has more than two requests of the scope in flight, each set is
// applied exactly once, the 429 restarted the window from its probe
// (a cooldown event), and every slot is given back.
func TestWindowBoundsConcurrencyAtTheCRM(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, scope = 40, "crm:acme:webhook"
	sim, err := crmsim.New(crmsim.Config{RateLimitShare: 0.1, Cooldown: time.Second, Latency: 20 * time.Millisecond,
		Rand: rand.New(rand.NewPCG(11, 12))})
	if err != nil {
		t.Fatal(err)
	}
	var peak atomic.Int64
	srv := httptest.NewServer(counting(sim.Handler(), &peak))
	t.Cleanup(srv.Close)
	tgt, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: crmsim.TokenDefault})
	if err != nil {
		t.Fatal(err)
	}
	// No growth above two: two full rounds take 2 × 1000 successes.
	c := setupWindowed(t, capacity.WindowConfig{Initial: 2, StartTarget: 2, GrowRounds: 1000},
		map[string]outbox.Destination{"acme": {Name: "webhook", Scope: scope, Target: tgt}}, 10)
	var ids []int64
	for range n {
		res, err := c.outbox.Commit(ctx, c.client, c.validated(t, "acme"), someActions)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.OutboxIDs...)
	}
	c.start(t)
	if !testwait.Until(2*time.Minute, c.ended, func() bool { return c.delivered(t, ids) }) {
		t.Fatalf("not every delivery was applied in 2m: the CRM saw %+v", sim.Stats())
	}
	deliveryJobs(t, c.client) // none failed

	st := sim.Stats()
	if st.RateLimited == 0 || st.Cooldowns == 0 {
		t.Fatal("the CRM never throttled: the test proves nothing")
	}
	if got := peak.Load(); got > 2 {
		t.Errorf("the CRM had %d requests of the scope in flight at once, want at most the window's 2", got)
	}
	if st.Applied != n {
		t.Errorf("the CRM holds %d sets, want %d", st.Applied, n)
	}
	for _, id := range ids {
		r, err := c.outbox.RowByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if k := st.ApplyCount[r.IdempotencyKey]; k != 1 {
			t.Errorf("%s applied %d times, want once", r.IdempotencyKey, k)
		}
	}
	evs, err := c.win.Events(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	cooldowns := 0
	for _, ev := range evs {
		if ev.Kind == "cooldown" {
			cooldowns++
		}
	}
	if cooldowns == 0 {
		t.Errorf("no cooldown among the window's events after %d 429s: %+v", st.RateLimited, evs)
	}
	c.win.Flush(ctx) // the last releases may still wait for an acquire (ReleaseLater)
	ws, err := c.win.State(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if ws.InFlight != 0 || ws.Waiting != 0 {
		t.Errorf("window after the last delivery: %+v; want no slot held and nobody in line", ws)
	}
	t.Logf("peak %d in flight; %d tries, %d 429s, %d cooldowns at the CRM; window %+v", peak.Load(), st.Deliveries, st.RateLimited,
		st.Cooldowns, ws)
}

// Four tenants whose CRM integration is one scope commit in turn, each
// with a shorter delivery deadline than the one before, while another
// worker holds the scope's probe: their deliveries take their places in
// the scope's line (a window of one). Once every one has asked, only the
// earliest-dying keeps asking; the others sleep by their place. When the
// probe succeeds, the CRM receives them one at a time in deadline order,
// not in commit order: each given-back slot wakes the next in line, long
// before the sleepers would wake by themselves.
func TestWindowWakesDeliveriesInDeadlineOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const scope = "crm:agency:webhook"
	sim, tgt := simTarget(t)
	tenants := []string{"t1", "t2", "t3", "t4"}
	dests := map[string]outbox.Destination{}
	for i, id := range tenants {
		dests[id] = outbox.Destination{Name: "webhook", Scope: scope, Target: tgt, DeliveryDeadline: time.Duration(len(tenants)-i) * time.Hour}
	}
	// A window of one that never grows; a slot is first thought to be held
	// for a minute, so a place behind the first sleeps a minute or more.
	c := setupWindowed(t, capacity.WindowConfig{Initial: 1, StartTarget: 1, GrowRounds: 1000, Hold: time.Minute, MaxWait: 2 * time.Minute},
		dests, len(tenants))
	// The scope's deadline has passed; its probe is out with another worker.
	const prober = -1
	if _, err := c.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: time.Now(), Source: "retry-after",
		Reason: "the CRM throttled another delivery"}); err != nil {
		t.Fatal(err)
	}
	if a, err := c.ledger.ScopeAdmit(ctx, scope, prober, time.Hour, time.Second); err != nil || a.Verdict != ledger.VerdictProbe {
		t.Fatalf("claiming the probe: %+v, %v", a, err)
	}
	keyOf := map[int64]string{}
	var ids []int64
	for _, id := range tenants {
		res, err := c.outbox.Commit(ctx, c.client, c.validated(t, id), someActions)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.OutboxIDs...)
		r, err := c.outbox.RowByID(ctx, res.OutboxIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		keyOf[r.ID] = r.IdempotencyKey
	}
	c.start(t)

	// Every delivery asked; all but one sleep a minute or more.
	var awake []*rivertype.JobRow
	if !testwait.Until(30*time.Second, c.ended, func() bool {
		awake = awake[:0]
		for _, j := range deliveryJobs(t, c.client) {
			if j.State != rivertype.JobStateScheduled || time.Until(j.ScheduledAt) < 45*time.Second {
				awake = append(awake, j)
			}
		}
		return len(awake) == 1
	}) {
		t.Fatalf("%d deliveries still asking, want the earliest-dying alone: %+v", len(awake), awake)
	}
	var args outbox.DeliverArgs
	if err := json.Unmarshal(awake[0].EncodedArgs, &args); err != nil {
		t.Fatal(err)
	}
	if args.OutboxID != ids[len(ids)-1] {
		t.Errorf("row %d keeps asking, want the earliest-dying, row %d", args.OutboxID, ids[len(ids)-1])
	}
	if st := sim.Stats(); st.Deliveries != 0 {
		t.Fatalf("the CRM saw %d deliveries while the probe was out", st.Deliveries)
	}

	if err := c.ledger.ScopeProbeSucceeded(ctx, scope, prober); err != nil {
		t.Fatal(err)
	}
	// Well within the minute the sleepers sleep: only the wake-ups bring
	// them.
	if !testwait.Until(30*time.Second, c.ended, func() bool { return c.delivered(t, ids) }) {
		t.Fatalf("not delivered within 30s of the scope's reopening: the CRM saw %+v", sim.Stats().Arrivals)
	}
	var want []string
	for _, id := range slices.Backward(ids) {
		want = append(want, keyOf[id])
	}
	var got []string
	for _, a := range sim.Stats().Arrivals {
		if a.Status != http.StatusCreated {
			t.Errorf("arrival %+v, want applied", a)
		}
		got = append(got, a.Key)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the CRM received %v, want deadline order %v", got, want)
	}
	c.win.Flush(ctx) // the last release may still wait for an acquire (ReleaseLater)
	if ws, err := c.win.State(ctx, scope); err != nil || ws.InFlight != 0 || ws.Waiting != 0 {
		t.Errorf("window after the last delivery: %+v, %v; want no slot held and nobody in line", ws, err)
	}
}
