package jobs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// Ingest routes each recording to a lane, asked for or by rule, and its
// first event says which and why: a deadline or a CRM action deadline
// sooner than the batch lane's completion bound goes immediate, the rest
// batch; batch work of a tenant whose vendor has no batch contract
// (openai) is queued one by one at lower priority. A lane asked for is
// kept, with a note when the deadline makes batch risky.
func TestIngestRoutesByRule(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{}, jobs.Config{}, 1)
	ctx := context.Background()
	// The pipelines route by a clock stopped at now: a reason names the
	// time left to a deadline to the second, which a loaded machine's
	// delay between the deadline's reckoning and the ingest would change.
	now := time.Now()
	cfg := e.pipeline.Config()
	cfg.Clock = clock.NewStub(now)
	p := newPipelineLike(t, e, cfg)
	// A second pipeline on the same database and audio root, whose tenant
	// t2 speaks openai (nothing is sent: routing happens at ingest).
	cfg.Tenants = map[string]jobs.TenantConfig{
		"t1": cfg.Tenants["t1"],
		"t2": {Provider: "openai", APIKey: "sk-not-used", Model: "whisper-1"},
	}
	p2 := newPipelineLike(t, e, cfg)
	t2file := filepath.Join(e.root, "t2", "call.wav")
	jobstest.WriteWAV(t, t2file, 2*time.Second, 99)

	cases := []struct {
		name      string
		pipeline  *jobs.Pipeline
		req       jobs.IngestRequest
		lane      ledger.Lane
		oneByOne  bool
		reasonHas string
		priority  int
		queue     string
	}{
		{name: "no deadline", req: jobs.IngestRequest{}, lane: ledger.LaneBatch,
			reasonHas: "no deadline sooner than the batch lane's completion bound of 1h0m0s", priority: 1, queue: jobs.QueueBatch},
		{name: "deadline soon", req: jobs.IngestRequest{Deadline: now.Add(20 * time.Minute)}, lane: ledger.LaneImmediate,
			reasonHas: "deadline in 20m0s, sooner than the batch lane's completion bound of 1h0m0s", priority: 1, queue: jobs.QueueImmediate},
		{name: "deadline late", req: jobs.IngestRequest{Deadline: now.Add(3 * time.Hour)}, lane: ledger.LaneBatch,
			reasonHas: "no deadline sooner", priority: 1, queue: jobs.QueueBatch},
		{name: "action deadline soon", req: jobs.IngestRequest{ActionDeadline: now.Add(30 * time.Minute)}, lane: ledger.LaneImmediate,
			reasonHas: "CRM action deadline in 30m0s", priority: 1, queue: jobs.QueueImmediate},
		{name: "action deadline late", req: jobs.IngestRequest{ActionDeadline: now.Add(5 * time.Hour)}, lane: ledger.LaneBatch,
			reasonHas: "no deadline sooner", priority: 1, queue: jobs.QueueBatch},
		{name: "asked immediate", req: jobs.IngestRequest{Lane: ledger.LaneImmediate, Deadline: now.Add(5 * time.Hour)}, lane: ledger.LaneImmediate,
			reasonHas: "asked for the immediate lane", priority: 1, queue: jobs.QueueImmediate},
		{name: "asked batch, deadline soon", req: jobs.IngestRequest{Lane: ledger.LaneBatch, Deadline: now.Add(10 * time.Minute)}, lane: ledger.LaneBatch,
			reasonHas: "asked for the batch lane (its deadline, in 10m0s, is sooner than the batch lane's completion bound of 1h0m0s: it may expire)",
			priority:  1, queue: jobs.QueueBatch},
		{name: "no batch contract", pipeline: p2, req: jobs.IngestRequest{TenantID: "t2"}, lane: ledger.LaneBatch, oneByOne: true,
			reasonHas: "openai has no batch contract: submitted one by one in the batch queue at lower priority",
			priority:  jobs.PriorityOneByOne, queue: jobs.QueueBatch},
		{name: "no batch contract, deadline soon", pipeline: p2, req: jobs.IngestRequest{TenantID: "t2", Deadline: now.Add(time.Minute)},
			lane: ledger.LaneImmediate, reasonHas: "deadline in 1m0s", priority: 1, queue: jobs.QueueImmediate},
	}
	for i, c := range cases {
		req := c.req
		req.CallID = fmt.Sprintf("route-%d", i)
		pl := p
		if c.pipeline != nil {
			pl = c.pipeline
		}
		if req.TenantID == "" {
			req.TenantID, req.Audio = "t1", files[0]
		} else {
			req.Audio = t2file
		}
		res, err := pl.Ingest(ctx, e.client, req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Recording.Lane != c.lane || res.Route == nil || res.Route.Lane != c.lane || res.Route.OneByOne != c.oneByOne ||
			!strings.Contains(res.Route.Reason, c.reasonHas) {
			t.Errorf("%s: lane %s, route %+v; want %s (one by one %v) because %q", c.name, res.Recording.Lane, res.Route, c.lane, c.oneByOne, c.reasonHas)
			continue
		}
		first := events(t, e.ledger, res.Recording.ID)[0]
		route, _ := first.Detail["route"].(map[string]any)
		if route["lane"] != string(c.lane) || route["reason"] != res.Route.Reason || (route["one_by_one"] == true) != c.oneByOne {
			t.Errorf("%s: first event's route %v, want %+v", c.name, first.Detail["route"], res.Route)
		}
		var priority int
		var queue string
		if err := e.pool.QueryRow(ctx, "SELECT priority, queue FROM river_job WHERE id = $1", res.JobID).Scan(&priority, &queue); err != nil {
			t.Fatalf("%s: job %d: %v", c.name, res.JobID, err)
		}
		if priority != c.priority || queue != c.queue {
			t.Errorf("%s: job priority %d on %s, want %d on %s", c.name, priority, queue, c.priority, c.queue)
		}
		// Ingesting it again converges: no route, no new job.
		again, err := pl.Ingest(ctx, e.client, req)
		if err != nil || again.Created || again.Route != nil {
			t.Errorf("%s: ingested again: %+v %v", c.name, again, err)
		}
	}
}

// newPipelineLike is a pipeline on e's database and audio root with cfg.
func newPipelineLike(t *testing.T, e *env, cfg jobs.Config) *jobs.Pipeline {
	t.Helper()
	store, err := audio.Open(context.Background(), audio.Config{URL: "file://" + e.root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	p, err := jobs.New(e.pool, e.ledger, cfg, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
