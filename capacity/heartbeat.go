package capacity

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Heartbeat refreshes every lease its process holds (Leases.RefreshHeld)
// every Config.HeartbeatEvery, and reports lost leases. Stop it before the
// process exits; Stop waits for the goroutine.
type Heartbeat struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// HeartbeatConfig configures StartHeartbeat.
type HeartbeatConfig struct {
	// OnLost is called, from the heartbeat goroutine, with each lease
	// found lost. Default nil: lost leases are only logged.
	OnLost func(Lease)

	// tick replaces the ticker (tests, see lease_export_test.go); afterBeat
	// is called after each beat.
	tick      <-chan time.Time
	afterBeat func(RefreshResult)
}

// StartHeartbeat starts the goroutine. ctx bounds it, like Stop.
func (l *Leases) StartHeartbeat(ctx context.Context, cfg HeartbeatConfig) *Heartbeat {
	ctx, cancel := context.WithCancel(ctx)
	h := &Heartbeat{cancel: cancel, done: make(chan struct{})}
	tick := cfg.tick
	var ticker *time.Ticker
	if tick == nil {
		ticker = time.NewTicker(l.cfg.HeartbeatEvery)
		tick = ticker.C
	}
	go func() {
		defer close(h.done)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
			res := l.RefreshHeld(ctx)
			for _, lost := range res.Lost {
				l.logger.Warn("capacity: lease lost (expired before its refresh)",
					slog.String("provider", lost.Provider), slog.String("kind", lost.Kind),
					slog.String("holder", lost.Holder), slog.String("lease", lost.ID))
				if cfg.OnLost != nil {
					cfg.OnLost(lost)
				}
			}
			if cfg.afterBeat != nil {
				cfg.afterBeat(res)
			}
		}
	}()
	return h
}

// Stop stops the heartbeat and waits for its goroutine. It is idempotent.
func (h *Heartbeat) Stop() {
	h.once.Do(h.cancel)
	<-h.done
}
