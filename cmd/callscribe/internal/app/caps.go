package app

import (
	"context"
	"log/slog"

	"github.com/callscribe/callscribe/capacity"
)

// CapsFrom is the shared capacity a pipeline works with, from the
// process's leases and Redis: the vendor slots (with their heartbeat,
// stopped by the returned func) when capacity.limits is set, and the
// scopes' windows. The returned func is called once the pipeline has
// stopped.
func (a *App) CapsFrom(ctx context.Context, leases *capacity.Leases, rdb *capacity.Redis) (Caps, func(), error) {
	var caps Caps
	stop := func() {}
	if len(a.Config.Capacity.Limits) > 0 {
		hb := leases.StartHeartbeat(context.WithoutCancel(ctx), capacity.HeartbeatConfig{})
		stop = hb.Stop
		caps.Slots = leaseSlots{leases: leases, limits: a.Config.Capacity.Limits}
		a.Logger.Info("vendor slots shared through Redis", slog.Int("limits", len(a.Config.Capacity.Limits)))
	}
	var err error
	if caps.Windows, err = a.OpenWindows(rdb); err != nil {
		stop()
		return caps, func() {}, err
	}
	// Releases still waiting for an acquire (capacity.Windows.ReleaseLater)
	// go before the process stops.
	return caps, func() { caps.Windows.Flush(context.WithoutCancel(ctx)); stop() }, nil
}
