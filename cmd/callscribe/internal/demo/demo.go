// Package demo is `callscribe demo`: the pipeline end to end on throwaway
// services against a misbehaving speech vendor, with the batch lane and a
// baseline of per-worker sleepers, then a report whose invariants decide
// the exit code.
package demo

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/progress"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/migrations"
	"github.com/callscribe/callscribe/outbox"
)

// Options are the knobs of `callscribe demo` (its flags).
type Options struct {
	Recordings string
	Copies     int
	Timeout    time.Duration
	Hold       bool
	Verbose    bool
	Sim        sttsim.Config
	Form       string
	Seed       uint64
	Baseline   bool
}

// Validate refuses flags the demo cannot run with, naming the flag.
func (o Options) Validate() error {
	switch {
	case o.Recordings == "":
		return errors.New("--recordings: want the directory of manifest.jsonl")
	case o.Copies < 1:
		return fmt.Errorf("--copies %d: want at least 1", o.Copies)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout %s: want a positive duration", o.Timeout)
	}
	for flag, v := range map[string]float64{"--rate-limit-share": o.Sim.RateLimitShare, "--unavailable-share": o.Sim.UnavailableShare,
		"--server-error-share": o.Sim.ServerErrorShare, "--async-share": o.Sim.AsyncShare, "--drop-after-accept-share": o.Sim.DropAfterAcceptShare} {
		if v < 0 || v > 1 {
			return fmt.Errorf("%s %v: want a share between 0 and 1", flag, v)
		}
	}
	return nil
}

func readDemoManifest(dir string) ([]ingest.Item, error) {
	f, err := os.Open(filepath.Join(dir, "manifest.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("demo recordings: %w (run from the repository root, or give --recordings)", err)
	}
	defer func() { _ = f.Close() }()
	var out []ingest.Item
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l ingest.Item
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", f.Name(), n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// Run runs the demo with a's configuration, writing its progress and
// report on out; it fails when an invariant broke.
func Run(ctx context.Context, process *app.App, out io.Writer, o Options) error {
	a := &demo{App: process}
	lines, err := readDemoManifest(o.Recordings)
	if err != nil {
		return err
	}
	recRoot, err := filepath.Abs(o.Recordings)
	if err != nil {
		return err
	}

	fmt.Fprintln(out, "callscribe demo: starting services…")
	svc, err := a.OpenServices(ctx)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := svc.Close(stopCtx); err != nil {
			a.Logger.Error("stopping demo services", "error", err)
		}
		for _, t := range svc.Throwaway {
			fmt.Fprintln(out, "  stopped and removed:", t)
		}
		fmt.Fprintln(out, "callscribe demo: stopped.")
	}()
	steps, err := migrations.New(svc.Pool, a.Logger).Up(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  schema:     %d migrations applied\n", len(steps))
	fmt.Fprintf(out, "  PostgreSQL: %s\n", svc.DatabaseHint)
	fmt.Fprintf(out, "  Redis:      %s\n", svc.RedisHint)

	// The vendor: two accounts (keys), so two throttling scopes.
	expected := map[string]string{}
	simCfg := o.Sim
	simCfg.APIKeys = []string{"demo-key-a", "demo-key-b"}
	simCfg.ExpectedText = expected
	for _, l := range lines {
		b, err := os.ReadFile(filepath.Join(recRoot, l.Audio))
		if err != nil {
			return fmt.Errorf("demo recording %s: %w", l.Audio, err)
		}
		expected[app.SHA256Hex(b)] = l.ExpectedText
	}
	simCfg.Rand = rand.New(rand.NewPCG(o.Seed, o.Seed))
	// The same recordings meet the same trouble in the baseline's run, and
	// throttling is decided when a request arrives, as a vendor's gateway
	// does (see sttsim.Config).
	simCfg.TroubleSeed, simCfg.DecideOnReceipt = o.Seed|1, true
	sim, err := sttsim.New(simCfg)
	if err != nil {
		return err
	}
	simCtx, stopSim := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSim()
	simURL, err := serveOnLoopback(simCtx, sim.Serve)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  vendor:     stt-http/v1 simulator at %s (%s in flight per scope, 429s %.0f%%, 503s %.0f%%, 5xx %.0f%%, async %.0f%%, drops %.0f%%, Retry-After %s, seed %d)\n",
		simURL, inFlightLimit(o.Sim.MaxInFlight), 100*o.Sim.RateLimitShare, 100*o.Sim.UnavailableShare, 100*o.Sim.ServerErrorShare,
		100*o.Sim.AsyncShare, 100*o.Sim.DropAfterAcceptShare, o.Form, o.Seed)

	if !o.Verbose && a.Config.Log.Level != "debug" {
		a.Logger = config.NewLogger(a.Env.Stderr, config.LogConfig{Level: "warn", Format: a.Config.Log.Format})
		a.InstallRedisLog()
	}
	// The CRM: a crm-webhook/v1 double that throttles and fails too.
	crmSim, err := crmsim.New(crmsim.Config{Tokens: []string{"demo-crm-token"}, RateLimitShare: o.Sim.RateLimitShare / 2,
		Cooldown: o.Sim.Cooldown, ServerErrorShare: o.Sim.ServerErrorShare, DropAfterApplyShare: o.Sim.DropAfterAcceptShare,
		Latency: o.Sim.Latency})
	if err != nil {
		return err
	}
	crmURL, err := serveOnLoopback(simCtx, crmSim.Serve)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  CRM:        crm-webhook/v1 double at %s (429s %.0f%%, 5xx %.0f%%, drops after apply %.0f%%)\n",
		crmURL, 50*o.Sim.RateLimitShare, 100*o.Sim.ServerErrorShare, 100*o.Sim.DropAfterAcceptShare)
	crmCfg := config.CRMConfig{Config: connector.Config{Kind: connector.KindWebhook, BaseURL: crmURL, Token: "demo-crm-token"}}

	a.Config.Audio.URL = recRoot
	pc := a.Config.Pipeline
	pc.Tenants = map[string]config.TenantConfig{
		"northline": {TenantConfig: jobs.TenantConfig{Provider: "generic-http", BaseURL: simURL, APIKey: "demo-key-a", Account: "demo-a", TimeZone: "America/Chicago"}, CRM: crmCfg},
		"harbor":    {TenantConfig: jobs.TenantConfig{Provider: "generic-http", BaseURL: simURL, APIKey: "demo-key-a", Account: "demo-a", TimeZone: "America/Los_Angeles"}, CRM: crmCfg},
		"ridgeway":  {TenantConfig: jobs.TenantConfig{Provider: "generic-http", BaseURL: simURL, APIKey: "demo-key-b", Account: "demo-b", TimeZone: "America/New_York"}, CRM: crmCfg},
	}
	// The demo shows the guarantees enforced: its cohorts enforce unless
	// the configuration says otherwise (a platform's new cohort observes).
	pc.RolloutDefault = cmp.Or(pc.RolloutDefault, ledger.RolloutEnforce)
	pc.PollInterval = cmpDur(pc.PollInterval, 200*time.Millisecond)
	pc.ProbeWait = cmpDur(pc.ProbeWait, 200*time.Millisecond)
	a.Config.Pipeline = pc
	if a.Config.RetryAfter.BaseBackoff == 0 {
		a.Config.RetryAfter.BaseBackoff = 200 * time.Millisecond
		a.Config.RetryAfter.MaxBackoff = 5 * time.Second
		a.Config.RetryAfter.MaxDelay = time.Minute
	}
	capRedis, err := capacity.NewRedis(capacity.RedisConfig{Client: svc.Redis, Logger: a.Logger})
	if err != nil {
		return err
	}
	windows, err := a.OpenWindows(capRedis)
	if err != nil {
		return err
	}
	defer windows.Flush(context.WithoutCancel(ctx)) // releases still waiting for an acquire (ReleaseLater)
	// The workers act as the runtime role, as a deployment's do; the
	// migration above needed the owner.
	rt, err := app.ConnectWorkers(ctx, svc.DatabaseURL, a.Logger, a.PoolSize())
	if err != nil {
		return err
	}
	defer rt.Close()
	e, err := a.PipelineOn(ctx, rt, app.Caps{Windows: windows})
	if err != nil {
		return err
	}
	defer func() { _ = e.Store.Close() }()

	total := 0
	for c := range o.Copies {
		for _, l := range lines {
			req, err := l.Request(ingest.Operator)
			if err != nil {
				return err
			}
			if c > 0 {
				req.CallID = fmt.Sprintf("%s-r%d", req.CallID, c)
			}
			if _, err := e.Jobs.Ingest(ctx, e.Client, req); err != nil {
				return fmt.Errorf("ingesting %s: %w", l.Audio, err)
			}
			total++
		}
	}
	fmt.Fprintf(out, "  ingested:   %d recordings (%d calls × %d) for 3 tenants on both lanes\n", total, len(lines), o.Copies)

	start := time.Now()
	if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	bar := progress.New(a.Env.Stderr, "settling", int64(total), progress.Count)
	deadline := time.After(o.Timeout)
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	var counts map[ledger.State]int
	interrupted := false
wait:
	for {
		counts, err = e.Ledger.CountByState(ctx)
		if err != nil && ctx.Err() == nil {
			return err
		}
		settled := 0
		for s, n := range counts {
			if s.Terminal() {
				settled += n
			}
		}
		pending, err := e.Outbox.Rows(ctx, outbox.StatePending, total+1)
		if err != nil && ctx.Err() == nil {
			return err
		}
		_ = bar.Set(max(0, settled-len(pending)))
		if settled == total && len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			interrupted = true
			break wait
		case <-deadline:
			break wait
		case <-ticker.C:
		}
	}
	_ = bar.Finish()
	elapsed := time.Since(start)
	_ = e.Jobs.Stop(context.WithoutCancel(ctx), e.Client)
	stopSim()

	var base *vendorFigures
	if o.Baseline && !interrupted {
		fmt.Fprintf(out, "  baseline:   %d per-worker sleepers on a fresh simulator, same seed…\n",
			e.Jobs.Config().ImmediateWorkers+e.Jobs.Config().BatchWorkers)
		b, err := a.runBaseline(ctx, e, simCfg, o.Seed, total)
		if err != nil {
			return fmt.Errorf("the baseline run: %w", err)
		}
		base = &b
	}
	broken := a.demoReport(context.WithoutCancel(ctx), out, e, sim, crmSim, total, start, elapsed, base)
	if !interrupted {
		// After the main report: these runs add recordings and deliveries.
		var lanes []batchLaneFigures
		for i, manifests := range []bool{false, true} {
			f, err := a.runBatchLane(ctx, rt, windows, lines, o.Copies, simCfg, o.Seed, manifests, fmt.Sprintf("b%d", i+1), o.Timeout)
			if err != nil {
				return fmt.Errorf("the batch lane's run: %w", err)
			}
			lanes = append(lanes, f)
		}
		broken = append(broken, batchLaneReport(out, lanes[0], lanes[1])...)
	}
	if len(broken) == 0 {
		fmt.Fprintln(out, "  invariants:                     all held")
	} else {
		for _, b := range broken {
			fmt.Fprintln(out, "  BROKEN:", b)
		}
	}
	if interrupted {
		return errors.New("interrupted before every recording settled")
	}
	if o.Hold {
		fmt.Fprintln(out, "callscribe demo: holding the services; press Ctrl-C to stop.")
		<-ctx.Done()
	}
	if len(broken) > 0 {
		return fmt.Errorf("invariants broken: %s", strings.Join(broken, "; "))
	}
	return nil
}

// demoReport prints the report of the main run and returns the invariants
// that broke (the caller prints them, with the batch lane's).
func (a *demo) demoReport(ctx context.Context, out io.Writer, e *app.Pipeline, sim *sttsim.Server, crmSim *crmsim.Server, total int,
	start time.Time, elapsed time.Duration, base *vendorFigures) []string {
	var broken []string
	st := sim.Stats()
	recs, err := e.Ledger.Recordings(ctx, ledger.RecordingFilter{Limit: total + 10})
	if err != nil {
		return []string{err.Error()}
	}
	byState := map[ledger.State]int{}
	var latencies []time.Duration
	attempts := 0
	maxAttempts := 0
	accurate := 0
	var lastTranscript time.Time
	for _, r := range recs {
		byState[r.State]++
		evs, err := e.Ledger.Events(ctx, r.ID)
		if err != nil {
			return []string{err.Error()}
		}
		for _, ev := range evs {
			if ev.New == ledger.StateTranscribed && ev.At.After(lastTranscript) {
				lastTranscript = ev.At
			}
		}
		if snap, err := ledger.Replay(evs); err != nil || snap != r.Snapshot() {
			broken = append(broken, fmt.Sprintf("history of %s/%s does not replay (%v)", r.TenantID, r.CallID, err))
		}
		if r.State != ledger.StateCommitted {
			continue
		}
		latencies = append(latencies, r.UpdatedAt.Sub(r.CreatedAt))
		attempts += r.Attempt
		maxAttempts = max(maxAttempts, r.Attempt)
		if tr, err := e.Ledger.Transcript(ctx, r.ID); err == nil && tr.Text != "" {
			accurate++
		}
	}
	fmt.Fprintf(out, "\ncallscribe demo report (%s)\n", elapsed.Round(time.Millisecond))
	states := make([]string, 0, len(byState))
	for s, n := range byState {
		states = append(states, fmt.Sprintf("%s %d", s, n))
	}
	sort.Strings(states)
	fmt.Fprintf(out, "  recordings by state:            %s\n", strings.Join(states, ", "))
	if byState[ledger.StateCommitted] != total {
		broken = append(broken, fmt.Sprintf("%d of %d recordings did not reach committed", total-byState[ledger.StateCommitted], total))
	}
	fmt.Fprintf(out, "  vendor answers:                 %d submissions, %d × 429, %d × 503, %d × 5xx, %d dropped after accept, %d polls, %d reconciles\n",
		st.Submissions, st.RateLimited, st.Unavailable, st.ServerErrors, st.Drops, st.Polls, st.Reconciles)
	fmt.Fprintf(out, "  cooldowns announced:            %d\n", len(st.Cooldowns))
	ours := figuresFrom(st, lastTranscript.Sub(start))
	beside := func(f func(vendorFigures) string) string {
		if base == nil {
			return ""
		}
		return " (per-worker sleepers, same vendor and seed: " + f(*base) + ")"
	}
	fmt.Fprintf(out, "  vendor requests per transcript: %.2f%s\n", ours.perTranscript(),
		beside(func(b vendorFigures) string { return fmt.Sprintf("%.2f", b.perTranscript()) }))
	fmt.Fprintf(out, "  over-limit 429s after a cooldown: %.2f in the second after each ends%s\n", ours.overLimitAfter,
		beside(func(b vendorFigures) string { return fmt.Sprintf("%.2f", b.overLimitAfter) }))
	fmt.Fprintf(out, "  submissions into an announced cooldown: %d%s\n", ours.intoCooldowns,
		beside(func(b vendorFigures) string { return strconv.Itoa(b.intoCooldowns) }))
	fmt.Fprintf(out, "  scope idle after a cooldown:    %s on average%s\n",
		ours.idleAfter.Round(time.Millisecond), beside(func(b vendorFigures) string { return b.idleAfter.Round(time.Millisecond).String() }))
	if !lastTranscript.IsZero() {
		fmt.Fprintf(out, "  last transcript after:          %s%s\n", ours.elapsed.Round(100*time.Millisecond),
			beside(func(b vendorFigures) string { return b.elapsed.Round(100 * time.Millisecond).String() }))
	}

	scopes := map[string]bool{}
	for _, t := range e.Jobs.Config().Tenants {
		scopes[t.Scope] = true
	}
	for s := range scopes {
		x, err := e.Ledger.ScopeDeferralExtensions(ctx, s)
		if err != nil {
			return append(broken, err.Error())
		}
		for i := 1; i < len(x); i++ {
			if x[i].ResultingNotBefore.Before(x[i-1].ResultingNotBefore) {
				broken = append(broken, "scope "+s+" deadline moved backward")
			}
		}
	}
	// The exact rule (ledger.SubmissionAccounting): by scope sequence
	// numbers, not clocks.
	acc, err := e.Ledger.SubmissionAccounting(ctx, nil, time.Time{})
	if err != nil {
		return append(broken, err.Error())
	}
	fmt.Fprintf(out, "  submissions that ignored a known cooldown: %d (must be 0)\n", acc.IgnoredKnownCooldown)
	fmt.Fprintf(out, "  submissions in flight when a cooldown was announced: %d (allowed; the vendor saw %d arrive inside one it had announced)\n",
		acc.InFlight, len(st.Violations))
	fmt.Fprintf(out, "  admission → send gap:           p50 %s, p99 %s, max %s\n", acc.GapP50.Round(10*time.Microsecond),
		acc.GapP99.Round(10*time.Microsecond), acc.GapMax.Round(10*time.Microsecond))
	if acc.IgnoredKnownCooldown > 0 {
		broken = append(broken, fmt.Sprintf("%d submissions ignored a known cooldown", acc.IgnoredKnownCooldown))
	}
	twice := 0
	for _, n := range st.Transcriptions {
		if n > 1 {
			twice++
		}
	}
	fmt.Fprintf(out, "  recordings transcribed more than once: %d (must be 0)\n", twice)
	if twice > 0 {
		broken = append(broken, fmt.Sprintf("%d recordings transcribed more than once", twice))
	}
	cst := crmSim.Stats()
	delivered, _ := e.Outbox.Rows(ctx, outbox.StateDelivered, total+10)
	dead, _ := e.Outbox.Rows(ctx, outbox.StateDead, total+10)
	conflicts, _ := e.Outbox.Counter(ctx, outbox.CounterDuplicateKeyConflicts)
	fmt.Fprintf(out, "  CRM deliveries:                 %d tries, %d × 429, %d × 5xx, %d dropped after apply, %d replays answered 200\n",
		cst.Deliveries, cst.RateLimited, cst.ServerErrors, cst.Drops, cst.Replays)
	fmt.Fprintf(out, "  action sets:                    %d delivered, %d dead, %d in the CRM, %d duplicate-key conflicts converged\n",
		len(delivered), len(dead), cst.Applied, conflicts)
	appliedTwice := 0
	for _, n := range cst.ApplyCount {
		if n > 1 {
			appliedTwice++
		}
	}
	fmt.Fprintf(out, "  action sets applied more than once in the CRM: %d (must be 0)\n", appliedTwice)
	if appliedTwice > 0 || cst.Conflicts > 0 {
		broken = append(broken, fmt.Sprintf("the CRM applied %d keys twice and saw %d conflicting bodies", appliedTwice, cst.Conflicts))
	}
	if cst.Applied != byState[ledger.StateCommitted] || len(dead) > 0 {
		broken = append(broken, fmt.Sprintf("the CRM holds %d action sets for %d committed recordings (%d dead deliveries)", cst.Applied, byState[ledger.StateCommitted], len(dead)))
	}
	if n := len(latencies); n > 0 {
		slices.Sort(latencies)
		fmt.Fprintf(out, "  submissions per recording:      %.2f on average, %d at most (the ledger's count)\n", float64(attempts)/float64(n), maxAttempts)
		fmt.Fprintf(out, "  receipt → committed latency:    p50 %s, p99 %s\n",
			latencies[n/2].Round(time.Millisecond), latencies[min(n-1, n*99/100)].Round(time.Millisecond))
		fmt.Fprintf(out, "  transcripts with text:          %d of %d\n", accurate, n)
	}
	return broken
}

func cmpDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// demo runs over one invocation's App.
type demo struct{ *app.App }
