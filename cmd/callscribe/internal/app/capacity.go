package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/jobs"
)

// InstallRedisLog routes go-redis's own messages (a line per failed dial
// during an outage) to a.logger at warn level, at most one a minute with a
// count of the rest, like the fail-open warning of package capacity.
// go-redis has one logger per process: the last command to start wins.
func (a *App) InstallRedisLog() {
	capacity.LogRedisClient(a.Logger)
}

// OpenLeases connects the vendor slot counters to the configured Redis.
func (a *App) OpenLeases() (*capacity.Leases, *capacity.Redis, error) {
	if a.Config.RedisURL == "" {
		return nil, nil, errors.New(config.EnvRedisURL + " is not set (nor redis_url in --config): capacity counts slots in a lasting, shared Redis")
	}
	rdb, err := a.NewCapacityRedis()
	if err != nil {
		return nil, nil, err
	}
	limits := map[string]capacity.ProviderLimit{}
	for k, v := range a.Config.Capacity.Limits {
		limits[k] = capacity.ProviderLimit{Limit: v.Limit, BatchReserve: v.BatchReserve}
	}
	l, err := capacity.New(rdb, capacity.Config{Limits: limits, LeaseSTT: a.Config.Capacity.LeaseSTT, LeaseTTS: a.Config.Capacity.LeaseTTS,
		HeartbeatEvery: a.Config.Capacity.HeartbeatEvery, PeakRetention: a.Config.Capacity.PeakRetention,
		OnLimitLearned: a.Alerts().learned})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("capacity: %w", err)
	}
	return l, rdb, nil
}

// OpenWindows builds the scopes' concurrency windows on rdb, or nil when
// capacity.window.disabled is set.
func (a *App) OpenWindows(rdb *capacity.Redis) (*capacity.Windows, error) {
	c := a.Config.Capacity.Window
	if c.Disabled || rdb == nil {
		return nil, nil
	}
	if c.ReleaseLinger > time.Second {
		return nil, fmt.Errorf("capacity.window.release_linger is %s, want at most 1s (a release waiting for the next acquire counts its slot as held)", c.ReleaseLinger)
	}
	w, err := capacity.NewWindows(rdb, capacity.WindowConfig{ImmediateShare: c.ImmediateShare, StartTarget: c.StartTarget,
		GrowRounds: c.GrowRounds, Strikes: c.Strikes, CeilingRetry: c.CeilingRetry, ReleaseLinger: c.ReleaseLinger})
	if err != nil {
		return nil, fmt.Errorf("capacity.window: %w", err)
	}
	return w, nil
}

// ReadWindows opens the scopes' windows for an operator command: nil (and
// a no-op close) when no Redis URL is configured.
func (a *App) ReadWindows() (*capacity.Windows, func(), error) {
	if a.Config.RedisURL == "" {
		return nil, func() {}, nil
	}
	opts, err := redis.ParseURL(a.Config.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis_url %s: %w", RedactURL(a.Config.RedisURL), err)
	}
	rdb := redis.NewClient(opts)
	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb})
	var w *capacity.Windows
	if err == nil {
		w, err = capacity.NewWindows(r, capacity.WindowConfig{})
	}
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return w, func() { _ = rdb.Close() }, nil
}

// PlanLimit is the configured limit of a provider's transcriptions (0:
// none), the cap of its scopes' windows.
func (a *App) PlanLimit(provider string) int {
	return a.Config.Capacity.Limits[provider+"/"+capacity.KindSTT].Limit
}

// OpenCallerIDs connects the organisations' caller-ID pools to the
// configured Redis; close closes the connection.
func (a *App) OpenCallerIDs() (c *capacity.CallerIDs, closeFn func(), err error) {
	if a.Config.RedisURL == "" {
		return nil, nil, errors.New(config.EnvRedisURL + " is not set (nor redis_url in --config): caller-ID pools live in a lasting, shared Redis")
	}
	rdb, err := a.NewCapacityRedis()
	if err != nil {
		return nil, nil, err
	}
	c, err = capacity.NewCallerIDs(rdb, capacity.CallerIDsConfig{})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return c, func() { _ = rdb.Close() }, nil
}

// leaseSlots lends the pipeline STT slots from the shared counters, as
// batch work, keyed by recording ("pipeline:<recording id>") so that
// whichever process polls the vendor's result can give the slot back. A
// provider with no configured limit is not counted.
type leaseSlots struct {
	leases *capacity.Leases
	limits map[string]config.CapacityLimit
}

var _ jobs.LeaseSlots = leaseSlots{}

func pipelineLeaseID(holder string) string { return "pipeline:" + holder }

func (s leaseSlots) counted(provider string) bool {
	_, ok := s.limits[provider+"/"+capacity.KindSTT]
	return ok
}

func (s leaseSlots) AcquireBatch(ctx context.Context, provider, holder string) (int, bool) {
	leases, req := s.BatchRequest(provider, holder)
	if leases == nil {
		return 0, true
	}
	_, g := leases.Acquire(ctx, req)
	return g.InUse, g.Granted
}

// BatchRequest is AcquireBatch's request (jobs.LeaseSlots).
func (s leaseSlots) BatchRequest(provider, holder string) (*capacity.Leases, capacity.Request) {
	if !s.counted(provider) {
		return nil, capacity.Request{}
	}
	return s.leases, capacity.Request{Provider: provider, Kind: capacity.KindSTT, Holder: holder, Lane: lane.Batch, ID: pipelineLeaseID(holder)}
}

func (s leaseSlots) Release(ctx context.Context, provider, holder string) {
	if leases, lease := s.Lease(provider, holder); leases != nil {
		leases.Release(ctx, lease)
	}
}

// Lease is holder's lease of provider (jobs.LeaseSlots), given back with
// the recording's window slot in one round trip.
func (s leaseSlots) Lease(provider, holder string) (*capacity.Leases, capacity.Lease) {
	if !s.counted(provider) {
		return nil, capacity.Lease{}
	}
	return s.leases, s.leases.Restore(capacity.Lease{ID: pipelineLeaseID(holder), Provider: provider, Kind: capacity.KindSTT, Holder: holder}, true)
}

func (s leaseSlots) Extend(ctx context.Context, provider, holder string, d time.Duration) {
	if s.counted(provider) {
		s.leases.Extend(ctx, provider, capacity.KindSTT, pipelineLeaseID(holder), s.leases.LeaseLength(capacity.KindSTT)+d)
	}
}

func (s leaseSlots) ReportRefusal(ctx context.Context, provider string, inUse int) {
	s.leases.ReportRefusal(ctx, provider, capacity.KindSTT, inUse)
}
