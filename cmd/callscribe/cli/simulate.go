package cli

import (
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// simulateSTTOptions are the flags of `callscribe simulate stt`.
type simulateSTTOptions struct {
	addr string
	cfg  sttsim.Config
	form string // cfg.RetryAfterForm, which the simulator checks
}

// Validate refuses an empty --addr and a share outside [0, 1], naming the
// flag.
func (o simulateSTTOptions) Validate() error {
	if o.addr == "" {
		return errors.New("--addr: want host:port")
	}
	for flag, v := range map[string]float64{"--rate-limit-share": o.cfg.RateLimitShare, "--unavailable-share": o.cfg.UnavailableShare,
		"--server-error-share": o.cfg.ServerErrorShare, "--async-share": o.cfg.AsyncShare, "--drop-after-accept-share": o.cfg.DropAfterAcceptShare} {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fmt.Errorf("%s %v: want a share between 0 and 1", flag, v)
		}
	}
	return nil
}

func (a *commands) simulateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "simulate", Short: "Run test doubles of the vendors"}
	var o simulateSTTOptions
	stt := &cobra.Command{
		Use:   "stt --addr 127.0.0.1:8090",
		Short: "Serve stt-http/v1 with realistic trouble (429s, a concurrency limit, 503s, latency, async answers, dropped connections)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			cfg := o.cfg
			cfg.RetryAfterForm, cfg.Logger = sttsim.RetryAfterForm(o.form), a.Logger
			srv, err := sttsim.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", o.addr)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", o.addr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stt-http/v1 simulator on http://%s (API key %q); Ctrl-C stops\n", ln.Addr(), sttsim.APIKeyDefault)
			err = srv.Serve(cmd.Context(), ln)
			st := srv.Stats()
			fmt.Fprintf(cmd.OutOrStdout(), "submissions %d, accepted %d, 429s %d (%d over the in-flight limit), 503s %d, 5xx %d, drops %d, cooldowns %d, violations %d\n",
				st.Submissions, st.Accepted, st.RateLimited, st.OverLimit, st.Unavailable, st.ServerErrors, st.Drops, len(st.Cooldowns), len(st.Violations))
			return err
		},
	}
	f := stt.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8090", "listen address (keep it on loopback: file:// audio is read from this host)")
	f.Float64Var(&o.cfg.RateLimitShare, "rate-limit-share", 0, "share of submissions refused with 429 (each starts a cooldown)")
	f.DurationVar(&o.cfg.Cooldown, "cooldown", 2*time.Second, "cooldown announced with each 429")
	f.StringVar(&o.form, "retry-after-form", "seconds", "seconds, imf-fixdate, rfc850, asctime, none, malformed or mixed")
	f.IntVar(&o.cfg.MaxInFlight, "max-in-flight", 0, "most submissions in flight per API key and model, async ones until ready; more get 429, no cooldown (0: unlimited)")
	f.DurationVar(&o.cfg.InFlightRetryAfter, "in-flight-retry-after", sttsim.InFlightRetryAfterDefault, "Retry-After of a 429 over --max-in-flight")
	f.Float64Var(&o.cfg.UnavailableShare, "unavailable-share", 0, "share answered 503")
	f.Float64Var(&o.cfg.ServerErrorShare, "server-error-share", 0, "share answered 500/502/504")
	f.DurationVar(&o.cfg.Latency, "latency", 0, "added before each answer")
	f.BoolVar(&o.cfg.DecideOnReceipt, "decide-on-receipt", false, "throttle submissions when they arrive (refusals answered at once, no latency), as a gateway does")
	f.Uint64Var(&o.cfg.TroubleSeed, "trouble-seed", 0, "draw each submission's trouble from its idempotency key and attempt (same seed, same trouble for any client); 0: arrival order")
	f.DurationVar(&o.cfg.LatencyJitter, "latency-jitter", 0, "random extra latency")
	f.Float64Var(&o.cfg.AsyncShare, "async-share", 0, "share of accepted submissions answered 202 and finished later")
	f.DurationVar(&o.cfg.ProcessingTime, "processing-time", time.Second, "how long an async transcription takes")
	f.Float64Var(&o.cfg.DropAfterAcceptShare, "drop-after-accept-share", 0, "share accepted and then answered with a dropped connection")
	cmd.AddCommand(stt)
	return cmd
}
