package capacity

import "time"

// WithTestNow returns cfg with the scripts' clock replaced by now (Unix
// milliseconds) instead of Redis TIME, so tests can move time
// deterministically. Test builds only.
func WithTestNow(cfg Config, now func() int64) Config {
	cfg.testNow = now
	return cfg
}

// WithTestTick returns cfg with the heartbeat's ticker replaced by tick
// and afterBeat called after every beat. Test builds only.
func WithTestTick(cfg HeartbeatConfig, tick <-chan time.Time, afterBeat func(RefreshResult)) HeartbeatConfig {
	cfg.tick, cfg.afterBeat = tick, afterBeat
	return cfg
}

// WithWindowTestNow returns cfg with the window scripts' clock replaced by
// now (Unix milliseconds). Test builds only.
func WithWindowTestNow(cfg WindowConfig, now func() int64) WindowConfig {
	cfg.testNow = now
	return cfg
}

// WithWindowTestGather returns cfg with f called with each batch of
// acquires before it is sent to Redis (f may block it). Test builds only.
func WithWindowTestGather(cfg WindowConfig, f func(batch []WindowRequest)) WindowConfig {
	cfg.testGather = f
	return cfg
}

// WaitingAcquires reports how many acquires wait in w for a script of
// their scope to answer before they go. Test builds only.
func (w *Windows) WaitingAcquires() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, g := range w.gathering {
		n += len(g.waiting)
	}
	return n
}
