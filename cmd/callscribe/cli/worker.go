package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve"
)

// workerOptions are the flags of `callscribe worker`.
type workerOptions struct{ metricsAddr, cpuProfile string }

// Validate refuses a --metrics-addr off loopback: that endpoint has no
// authentication.
func (o workerOptions) Validate() error {
	if o.metricsAddr != "" && !config.Loopback(o.metricsAddr) {
		return fmt.Errorf("--metrics-addr %s: a loopback address only (the endpoint has no authentication; put serve's authenticated /metrics or a proxy in front for more)", o.metricsAddr)
	}
	return nil
}

func (a *commands) workerCommand() *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the pipeline's River workers until SIGTERM or Ctrl-C (then finish running steps within pipeline.shutdown_grace)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if a.Config.DatabaseURL == "" {
				return app.ErrNoDatabase
			}
			if o.cpuProfile != "" {
				stopProfile, err := startCPUProfile(o.cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			var caps app.Caps
			if a.Config.RedisURL != "" {
				leases, rdb, err := a.OpenLeases()
				if err != nil {
					return err
				}
				defer func() { _ = rdb.Close() }()
				stopAlerts, err := a.StartAlertWebhook()
				if err != nil {
					return err
				}
				defer stopAlerts()
				var stop func()
				if caps, stop, err = a.CapsFrom(ctx, leases, rdb); err != nil {
					return err
				}
				defer stop()
			} else {
				a.Logger.Warn("no Redis URL: scopes have no shared concurrency window (admission is the scope's deadline and probe only)")
			}
			if o.metricsAddr != "" {
				// This process's counters, for Prometheus to scrape and sum
				// across workers; the global gauges come from serve.
				caps.Metrics = serve.NewMetrics(a.App, serve.MetricsSources{Windows: caps.Windows})
				stopMetrics, err := serve.ListenMetrics(ctx, a.App, o.metricsAddr, caps.Metrics.Handler())
				if err != nil {
					return err
				}
				defer stopMetrics()
			}
			e, err := a.OpenPipeline(ctx, caps)
			if err != nil {
				return err
			}
			defer e.Close()
			// River's own context must outlive the signal: stopping is ours.
			if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("starting workers: %w", err)
			}
			cfg := e.Jobs.Config()
			a.Logger.Info("worker started", slog.Int("immediate_workers", cfg.ImmediateWorkers), slog.Int("batch_workers", cfg.BatchWorkers),
				slog.Int("tenants", len(cfg.Tenants)))
			<-ctx.Done()
			a.Logger.Info("stopping: no new work is fetched; running steps get the shutdown grace", slog.Duration("grace", cfg.ShutdownGrace))
			return e.Jobs.Stop(context.WithoutCancel(ctx), e.Client)
		},
	}
	cmd.Flags().StringVar(&o.metricsAddr, "metrics-addr", "", "serve this process's Prometheus metrics on host:port (loopback only; no authentication) at /metrics")
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a pprof CPU profile of this process to FILE from start until the worker has stopped (off by default; read it with go tool pprof)")
	return cmd
}

// startCPUProfile profiles the process's CPU into a new file at path
// until the returned func is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path) //nolint:gosec // the operator names the file
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
