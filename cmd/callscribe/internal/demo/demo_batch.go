package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// batchLaneFigures is what the demo's batch-lane recordings cost at the
// vendor, sent one way.
type batchLaneFigures struct {
	recordings, committed int
	// requests: every request the vendor saw (single and batch
	// submissions, polls, reconciliations); batches: the batch
	// submissions among them.
	requests, batches int
	manifests         int
	appliedTwice      int
}

func (f batchLaneFigures) perTranscript() float64 {
	if f.committed == 0 {
		return 0
	}
	return float64(f.requests) / float64(f.committed)
}

// runBatchLane transcribes the demo's batch-lane recordings again, as new
// calls (suffix), on a fresh vendor with the main run's trouble and seed
// and a fresh CRM, with the batch lane's manifests on or off, until every
// one is settled and delivered; it returns what that cost at the vendor.
func (a *demo) runBatchLane(ctx context.Context, rt *pgxpool.Pool, windows *capacity.Windows, lines []ingest.Item, copies int,
	simCfg sttsim.Config, seed uint64, manifests bool, suffix string, timeout time.Duration,
) (batchLaneFigures, error) {
	var f batchLaneFigures
	simCfg.Rand = rand.New(rand.NewPCG(seed, seed))
	sim, err := sttsim.New(simCfg)
	if err != nil {
		return f, err
	}
	crmSim, err := crmsim.New(crmsim.Config{Tokens: []string{"demo-crm-token"}})
	if err != nil {
		return f, err
	}
	simCtx, stop := context.WithCancel(ctx)
	defer stop()
	sttURL, err := serveOnLoopback(simCtx, sim.Serve)
	if err != nil {
		return f, err
	}
	crmURL, err := serveOnLoopback(simCtx, crmSim.Serve)
	if err != nil {
		return f, err
	}
	saved := a.Config.Pipeline
	defer func() { a.Config.Pipeline = saved }()
	pc := saved
	pc.Tenants = map[string]config.TenantConfig{}
	for id, t := range saved.Tenants {
		t.BaseURL = sttURL
		t.CRM.Config = connector.Config{Kind: connector.KindWebhook, BaseURL: crmURL, Token: "demo-crm-token"}
		pc.Tenants[id] = t
	}
	pc.Batch = jobs.BatchConfig{Manifests: manifests, MaxWait: 500 * time.Millisecond, FormEvery: 200 * time.Millisecond,
		PollInterval: time.Second}
	a.Config.Pipeline = pc
	e, err := a.PipelineOn(ctx, rt, app.Caps{Windows: windows})
	if err != nil {
		return f, err
	}
	defer func() { _ = e.Store.Close() }()
	ids := map[string]bool{}
	for c := range copies {
		for _, l := range lines {
			if l.Lane != string(ledger.LaneBatch) {
				continue
			}
			req, err := l.Request(ingest.Operator)
			if err != nil {
				return f, err
			}
			req.CallID = fmt.Sprintf("%s-r%d-%s", req.CallID, c, suffix)
			res, err := e.Jobs.Ingest(ctx, e.Client, req)
			if err != nil {
				return f, fmt.Errorf("ingesting %s: %w", l.Audio, err)
			}
			ids[res.Recording.ID.String()] = true
		}
	}
	f.recordings = len(ids)
	phaseStart := time.Now().Add(-time.Second)
	if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
		return f, err
	}
	defer func() { _ = e.Jobs.Stop(context.WithoutCancel(ctx), e.Client) }()
	deadline := time.Now().Add(timeout)
	for {
		recs, err := e.Ledger.Recordings(ctx, ledger.RecordingFilter{Limit: 100000})
		if err != nil {
			return f, err
		}
		settled, committed := 0, 0
		for _, r := range recs {
			if ids[r.ID.String()] && r.State.Terminal() {
				settled++
				if r.State == ledger.StateCommitted {
					committed++
				}
			}
		}
		pending, err := e.Outbox.Rows(ctx, outbox.StatePending, 1)
		if err != nil {
			return f, err
		}
		if settled == f.recordings && len(pending) == 0 {
			f.committed = committed
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f, fmt.Errorf("%d of %d batch-lane recordings settled after %s", settled, f.recordings, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := sim.Stats()
	f.requests, f.batches = st.Submissions+st.Polls+st.Reconciles, st.Batches
	ms, err := e.Ledger.Manifests(ctx, ledger.ManifestFilter{Limit: 100000})
	if err != nil {
		return f, err
	}
	for _, m := range ms {
		if m.CreatedAt.After(phaseStart) {
			f.manifests++
		}
	}
	for _, n := range crmSim.Stats().ApplyCount {
		if n > 1 {
			f.appliedTwice++
		}
	}
	return f, nil
}

// serveOnLoopback serves on a free loopback port until ctx ends and
// returns its URL.
func serveOnLoopback(ctx context.Context, serve func(context.Context, net.Listener) error) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), nil
}

// batchLaneReport prints the batch lane's comparison and returns the
// invariants that broke.
func batchLaneReport(out io.Writer, one, many batchLaneFigures) []string {
	fmt.Fprintf(out, "  batch lane, its %d recordings again on fresh doubles (the same trouble and seed):\n", one.recordings)
	fmt.Fprintf(out, "    one by one:                   %d vendor requests, %.2f per transcript\n", one.requests, one.perTranscript())
	ratio := ""
	if many.perTranscript() > 0 {
		ratio = fmt.Sprintf(": %.1f× fewer", one.perTranscript()/many.perTranscript())
	}
	fmt.Fprintf(out, "    in manifests:                 %d vendor requests (%d batch submissions, %d manifests), %.2f per transcript%s\n",
		many.requests, many.batches, many.manifests, many.perTranscript(), ratio)
	var broken []string
	for _, f := range []struct {
		name string
		f    batchLaneFigures
	}{{"one by one", one}, {"in manifests", many}} {
		if f.f.committed != f.f.recordings {
			broken = append(broken, fmt.Sprintf("batch lane %s: %d of %d recordings committed", f.name, f.f.committed, f.f.recordings))
		}
		if f.f.appliedTwice > 0 {
			broken = append(broken, fmt.Sprintf("batch lane %s: %d action sets applied twice", f.name, f.f.appliedTwice))
		}
	}
	return broken
}
