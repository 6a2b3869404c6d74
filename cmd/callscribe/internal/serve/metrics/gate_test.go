package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/internal/testredis"
)

// /metrics carries the admission gate's series: the tickets held as
// Redis counts them (those of another process's gate too), this process's
// admissions, rejections and waits; without Redis the held tickets are
// left out and counted as a scrape error, the rest still served.
func TestScrapeGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "metrics")
	gateOf := func() *live.Gate {
		r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb, KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		g, err := live.NewGate(r, live.GateConfig{Name: "front", Size: 2, Ceilings: map[string]int{"vendor_plan": 10}, Timeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g, other := gateOf(), gateOf()
	m := metrics.New(metrics.Config{Gate: g, FailOpen: map[string]func() int64{"gate": g.Uncounted}})
	if _, err := g.Enter(ctx, "acme", "call-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Enter(ctx, "acme", "call-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Enter(ctx, "acme", "call-3"); !errors.Is(err, live.ErrGateFull) {
		t.Fatalf("3rd enter: %v, want ErrGateFull", err)
	}
	fams := scrape(t, m)
	for name, want := range map[string]float64{
		"callscribe_gate_in_use":          2, // one of them held through the other gate
		"callscribe_gate_size":            2,
		"callscribe_gate_waiting":         0,
		"callscribe_gate_admitted_total":  1,
		"callscribe_gate_rejected_total":  1,
		"callscribe_gate_reclaimed_total": 0,
	} {
		if v, ok := value(fams, name, "gate", "front"); !ok || v != want {
			t.Errorf("%s{gate=front} = %v (served %v), want %v", name, v, ok, want)
		}
	}
	hist := func(outcome string) uint64 {
		f, ok := fams["callscribe_gate_wait_seconds"]
		if !ok {
			t.Fatal("callscribe_gate_wait_seconds not served")
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return s.GetHistogram().GetSampleCount()
				}
			}
		}
		t.Fatalf("no wait series of outcome %s", outcome)
		return 0
	}
	if hist("admitted") != 1 || hist("rejected") != 1 {
		t.Errorf("wait histogram counts admitted %d, rejected %d; want 1, 1", hist("admitted"), hist("rejected"))
	}
	if v, ok := value(fams, "callscribe_capacity_fail_open_total", "component", "gate"); !ok || v != 0 {
		t.Errorf("callscribe_capacity_fail_open_total{component=gate} = %v (served %v), want 0", v, ok)
	}

	// Without Redis: admitted uncounted, held tickets left out.
	down, err := capacity.NewRedis(capacity.RedisConfig{URL: "redis://127.0.0.1:1/0", KeyPrefix: prefix, AdmitOpTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = down.Close() })
	dg, err := live.NewGate(down, live.GateConfig{Size: 2, Ceilings: map[string]int{"vendor_plan": 10}})
	if err != nil {
		t.Fatal(err)
	}
	dm := metrics.New(metrics.Config{Gate: dg, FailOpen: map[string]func() int64{"gate": dg.Uncounted}})
	if tk, err := dg.Enter(ctx, "", ""); err != nil || !tk.Uncounted {
		t.Fatalf("enter without Redis: %+v %v", tk, err)
	}
	fams = scrape(t, dm)
	if _, ok := value(fams, "callscribe_gate_in_use"); ok {
		t.Error("callscribe_gate_in_use served without Redis")
	}
	for name, want := range map[string]float64{"callscribe_gate_admitted_total": 1, "callscribe_scrape_errors_total": 1} {
		if v, ok := value(fams, name); !ok || v != want {
			t.Errorf("%s = %v (served %v), want %v", name, v, ok, want)
		}
	}
	if v, _ := value(fams, "callscribe_capacity_fail_open_total", "component", "gate"); v != 1 {
		t.Errorf("callscribe_capacity_fail_open_total{component=gate} = %v, want 1", v)
	}
}
