package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// installRedisLog routes go-redis's own messages (a line per failed dial
// during an outage) to a.logger at warn level, at most one a minute with a
// count of the rest, like the fail-open warning of package capacity.
// go-redis has one logger per process: the last command to start wins.
func (a *app) installRedisLog() {
	capacity.InstallRedisLog(capacity.NewRedisLog(a.logger, capacity.WarnIntervalDefault, nil))
}

// openLeases connects the vendor slot counters to the configured Redis.
func (a *app) openLeases() (*capacity.Leases, *redis.Client, error) {
	if a.config.RedisURL == "" {
		return nil, nil, errors.New(config.EnvRedisURL + " is not set (nor redis_url in --config): capacity counts slots in a lasting, shared Redis")
	}
	opts, err := capacity.FailFastOptions(a.config.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis_url %s: %w", redactURL(a.config.RedisURL), err)
	}
	rdb := redis.NewClient(opts)
	limits := map[string]capacity.ProviderLimit{}
	for k, v := range a.config.Capacity.Limits {
		limits[k] = capacity.ProviderLimit{Limit: v.Limit, BatchReserve: v.BatchReserve}
	}
	l, err := capacity.New(capacity.Config{Redis: rdb, Limits: limits, LeaseSTT: a.config.Capacity.LeaseSTT, LeaseTTS: a.config.Capacity.LeaseTTS,
		HeartbeatEvery: a.config.Capacity.HeartbeatEvery, PeakRetention: a.config.Capacity.PeakRetention, Logger: a.logger,
		OnLimitLearned: a.alerts().learned})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("capacity: %w", err)
	}
	return l, rdb, nil
}

// leaseSlots lends the pipeline STT slots from the shared counters, as
// batch work, keyed by recording ("pipeline:<recording id>") so that
// whichever process polls the vendor's result can give the slot back. A
// provider with no configured limit is not counted.
type leaseSlots struct {
	leases *capacity.Leases
	limits map[string]config.CapacityLimit
}

func pipelineLeaseID(holder string) string { return "pipeline:" + holder }

func (s leaseSlots) counted(provider string) bool {
	_, ok := s.limits[provider+"/"+capacity.KindSTT]
	return ok
}

func (s leaseSlots) AcquireBatch(ctx context.Context, provider, holder string) (int, bool) {
	if !s.counted(provider) {
		return 0, true
	}
	_, g := s.leases.Acquire(ctx, capacity.Request{Provider: provider, Kind: capacity.KindSTT, Holder: holder, Lane: capacity.Batch,
		ID: pipelineLeaseID(holder)})
	return g.InUse, g.Granted
}

func (s leaseSlots) Release(ctx context.Context, provider, holder string) {
	if !s.counted(provider) {
		return
	}
	s.leases.Release(ctx, s.leases.Restore(capacity.Lease{ID: pipelineLeaseID(holder), Provider: provider, Kind: capacity.KindSTT, Holder: holder}, true))
}

func (s leaseSlots) Extend(ctx context.Context, provider, holder string, d time.Duration) {
	if s.counted(provider) {
		s.leases.Extend(ctx, provider, capacity.KindSTT, pipelineLeaseID(holder), s.leases.LeaseLength(capacity.KindSTT)+d)
	}
}

func (s leaseSlots) ReportRefusal(ctx context.Context, provider string, inUse int) {
	s.leases.ReportRefusal(ctx, provider, capacity.KindSTT, inUse)
}

// openWindows builds the scopes' concurrency windows on rdb, or nil when
// capacity.window.disabled is set.
func (a *app) openWindows(rdb redis.UniversalClient) (*capacity.Windows, error) {
	c := a.config.Capacity.Window
	if c.Disabled || rdb == nil {
		return nil, nil
	}
	w, err := capacity.NewWindows(capacity.WindowConfig{Redis: rdb, ImmediateShare: c.ImmediateShare, StartTarget: c.StartTarget,
		GrowRounds: c.GrowRounds, Strikes: c.Strikes, CeilingRetry: c.CeilingRetry, Logger: a.logger})
	if err != nil {
		return nil, fmt.Errorf("capacity.window: %w", err)
	}
	return w, nil
}

// readWindows opens the scopes' windows for an operator command: nil (and
// a no-op close) when no Redis URL is configured.
func (a *app) readWindows() (*capacity.Windows, func(), error) {
	if a.config.RedisURL == "" {
		return nil, func() {}, nil
	}
	opts, err := redis.ParseURL(a.config.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis_url %s: %w", redactURL(a.config.RedisURL), err)
	}
	rdb := redis.NewClient(opts)
	w, err := capacity.NewWindows(capacity.WindowConfig{Redis: rdb})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return w, func() { _ = rdb.Close() }, nil
}

// planLimit is the configured limit of a provider's transcriptions (0:
// none), the cap of its scopes' windows.
func (a *app) planLimit(provider string) int {
	return a.config.Capacity.Limits[provider+"/"+capacity.KindSTT].Limit
}

func (a *app) capacityCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "capacity", Short: "Vendor concurrency slots shared by live calls and the pipeline"}
	status := &cobra.Command{
		Use:   "status",
		Short: "In use, configured and effective (learned) limits, and the latest per-minute peak, per provider and kind",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, rdb, err := a.openLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			st, err := l.Status(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tKIND\tIN USE\tLIMIT\tEFFECTIVE\tPEAK (LAST MINUTE SEEN)")
			for _, s := range st {
				eff := strconv.Itoa(s.EffectiveLimit)
				if s.Learned {
					eff += " (learned)"
				}
				peak := "-"
				if n := len(s.PeakPerMinute); n > 0 {
					p := s.PeakPerMinute[n-1]
					peak = fmt.Sprintf("%d at %s", p.Peak, p.Minute.Format("15:04"))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.Provider, s.Kind, s.InUse, s.ConfiguredLimit, eff, peak)
			}
			return tw.Flush()
		},
	}
	setLimit := &cobra.Command{
		Use:   "set-limit PROVIDER KIND LIMIT",
		Short: "Set a provider's effective limit (the operator's; clears a learned one). Nothing raises a limit automatically.",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[2])
			if err != nil || n < 0 {
				return fmt.Errorf("LIMIT %q: want a whole number >= 0", args[2])
			}
			l, rdb, err := a.openLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			if err := l.SetLimit(cmd.Context(), args[0], args[1], n); err != nil {
				return err
			}
			a.logger.Info("capacity limit set by an operator", slog.String("provider", args[0]), slog.String("kind", args[1]), slog.Int("limit", n))
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s limit set to %d\n", args[0], args[1], n)
			return nil
		},
	}
	cmd.AddCommand(status, setLimit)
	return cmd
}
