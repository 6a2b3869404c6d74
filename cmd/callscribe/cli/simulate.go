package cli

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

func (a *commands) simulateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "simulate", Short: "Run test doubles of the vendors"}
	var addr string
	var cfg sttsim.Config
	var form string
	stt := &cobra.Command{
		Use:   "stt --addr 127.0.0.1:8090",
		Short: "Serve stt-http/v1 with realistic trouble (429s, a concurrency limit, 503s, latency, async answers, dropped connections)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.RetryAfterForm = sttsim.RetryAfterForm(form)
			cfg.Logger = a.Logger
			srv, err := sttsim.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", addr, err)
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
	f.StringVar(&addr, "addr", "127.0.0.1:8090", "listen address (keep it on loopback: file:// audio is read from this host)")
	f.Float64Var(&cfg.RateLimitShare, "rate-limit-share", 0, "share of submissions refused with 429 (each starts a cooldown)")
	f.DurationVar(&cfg.Cooldown, "cooldown", 2*time.Second, "cooldown announced with each 429")
	f.StringVar(&form, "retry-after-form", "seconds", "seconds, imf-fixdate, rfc850, asctime, none, malformed or mixed")
	f.IntVar(&cfg.MaxInFlight, "max-in-flight", 0, "most submissions in flight per API key and model, async ones until ready; more get 429, no cooldown (0: unlimited)")
	f.DurationVar(&cfg.InFlightRetryAfter, "in-flight-retry-after", sttsim.InFlightRetryAfterDefault, "Retry-After of a 429 over --max-in-flight")
	f.Float64Var(&cfg.UnavailableShare, "unavailable-share", 0, "share answered 503")
	f.Float64Var(&cfg.ServerErrorShare, "server-error-share", 0, "share answered 500/502/504")
	f.DurationVar(&cfg.Latency, "latency", 0, "added before each answer")
	f.BoolVar(&cfg.DecideOnReceipt, "decide-on-receipt", false, "throttle submissions when they arrive (refusals answered at once, no latency), as a gateway does")
	f.Uint64Var(&cfg.TroubleSeed, "trouble-seed", 0, "draw each submission's trouble from its idempotency key and attempt (same seed, same trouble for any client); 0: arrival order")
	f.DurationVar(&cfg.LatencyJitter, "latency-jitter", 0, "random extra latency")
	f.Float64Var(&cfg.AsyncShare, "async-share", 0, "share of accepted submissions answered 202 and finished later")
	f.DurationVar(&cfg.ProcessingTime, "processing-time", time.Second, "how long an async transcription takes")
	f.Float64Var(&cfg.DropAfterAcceptShare, "drop-after-accept-share", 0, "share accepted and then answered with a dropped connection")
	cmd.AddCommand(stt)
	return cmd
}
