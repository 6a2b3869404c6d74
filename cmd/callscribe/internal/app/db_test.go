package app

import (
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/jobs"
)

// The pool of a worker process follows its worker counts: one connection
// per worker of each queue plus the spare, never below the default.
func TestPoolSizeFollowsWorkers(t *testing.T) {
	t.Parallel()
	// One connection per worker of each queue (the crm queue's 10, the
	// replay queue's 4 by default) and 10 spare, at least 40.
	for _, c := range []struct {
		immediate, batch, replay int
		want                     int32
	}{{0, 0, 0, 44}, {5, 5, 0, 40}, {10, 60, 0, 94}, {100, 100, 0, 224}, {10, 60, 16, 106}} {
		a := &App{Config: config.Config{Pipeline: config.PipelineConfig{Config: jobs.Config{ImmediateWorkers: c.immediate, BatchWorkers: c.batch}},
			Replay: config.ReplayConfig{Workers: c.replay}}}
		if got := a.PoolSize(); got != c.want {
			t.Errorf("immediate %d, batch %d, replay %d: pool %d, want %d", c.immediate, c.batch, c.replay, got, c.want)
		}
	}
}
