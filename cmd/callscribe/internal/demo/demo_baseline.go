package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/jobs/sleepers"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// The baseline sleepers' backoff when a 429 carries no usable Retry-After.
const (
	baselineBaseBackoff = 200 * time.Millisecond
	baselineMaxBackoff  = 5 * time.Second
)

// vendorFigures are what transcribing the demo's recordings cost at the
// vendor: the measures callscribe exists for.
type vendorFigures struct {
	submissions, transcribed int
	// overLimitAfter is the over-limit 429s that arrived in the second
	// after a cooldown ended, on average per cooldown.
	overLimitAfter float64
	cooldowns      int
	// intoCooldowns is the submissions that arrived inside a cooldown
	// already announced to their client and admitted after it (or not
	// saying when): the simulator's violations.
	intoCooldowns int
	// idleAfter is how long the scope stayed idle after a cooldown ended,
	// on average.
	idleAfter time.Duration
	// elapsed is from the start until the last transcript.
	elapsed time.Duration
}

func (f vendorFigures) perTranscript() float64 {
	if f.transcribed == 0 {
		return 0
	}
	return float64(f.submissions) / float64(f.transcribed)
}

func figuresFrom(st sttsim.Stats, elapsed time.Duration) vendorFigures {
	per, _ := st.OverLimitAfterCooldowns(time.Second)
	idle, _ := st.ReopenLag()
	return vendorFigures{submissions: st.Submissions, transcribed: len(st.Transcriptions), overLimitAfter: per,
		cooldowns: len(st.Cooldowns), intoCooldowns: len(st.Violations), idleAfter: idle, elapsed: elapsed}
}

func inFlightLimit(n int) string {
	if n <= 0 {
		return "no limit"
	}
	return fmt.Sprintf("≤ %d", n)
}

// runBaseline transcribes the demo's recordings again with per-worker
// sleepers (as many as the pipeline's workers, each honouring Retry-After
// alone) against a fresh simulator with the same configuration and seed,
// and returns what that cost.
func (a *demo) runBaseline(ctx context.Context, e *app.Pipeline, simCfg sttsim.Config, seed uint64, total int) (vendorFigures, error) {
	simCfg.Rand = rand.New(rand.NewPCG(seed, seed))
	sim, err := sttsim.New(simCfg)
	if err != nil {
		return vendorFigures{}, err
	}
	simCtx, stop := context.WithCancel(ctx)
	defer stop()
	url, err := serveOnLoopback(simCtx, sim.Serve)
	if err != nil {
		return vendorFigures{}, err
	}
	cfg := e.Jobs.Config()
	providers := map[string]stt.Provider{}
	for id, t := range cfg.Tenants {
		if providers[id], err = stt.New(t.Provider, stt.Config{BaseURL: url, APIKey: t.APIKey, Model: t.Model}); err != nil {
			return vendorFigures{}, err
		}
	}
	recs, err := e.Ledger.Recordings(ctx, ledger.RecordingFilter{Limit: total + 10})
	if err != nil {
		return vendorFigures{}, err
	}
	items := make([]sleepers.Item, 0, len(recs))
	for _, r := range recs {
		u, err := e.Store.URL(ctx, r.AudioURI, time.Hour)
		if err != nil {
			return vendorFigures{}, err
		}
		items = append(items, sleepers.Item{Key: r.BusinessKey, TenantID: r.TenantID, CallID: r.CallID, AudioURL: u,
			AudioSHA256: r.AudioSHA256, AudioBytes: r.AudioBytes, Provider: providers[r.TenantID]})
	}
	// The sleepers at their best: a short backoff when a 429 says nothing
	// usable (a long one would only make them look worse), the
	// pipeline's poll interval.
	policy := cfg.RetryAfter
	policy.BaseBackoff, policy.MaxBackoff = baselineBaseBackoff, baselineMaxBackoff
	res, err := sleepers.Run(ctx, sleepers.Config{Workers: cfg.ImmediateWorkers + cfg.BatchWorkers, RetryAfter: policy,
		PollInterval: cfg.PollInterval}, items)
	if err != nil {
		return vendorFigures{}, err
	}
	return figuresFrom(sim.Stats(), res.Elapsed), nil
}
