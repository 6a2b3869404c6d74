package cli

import (
	"testing"

	"github.com/callscribe/callscribe/jobs"
)

// The pool of a worker process follows its worker counts: one connection
// per worker of each queue plus the spare, never below the default.
func TestPoolSizeFollowsWorkers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		immediate, batch int
		want             int32
	}{{0, 0, 40}, {5, 5, 40}, {10, 60, 90}, {100, 100, 220}} {
		a := &app{config: Config{Pipeline: PipelineConfig{Config: jobs.Config{ImmediateWorkers: c.immediate, BatchWorkers: c.batch}}}}
		if got := a.poolSize(); got != c.want {
			t.Errorf("immediate %d, batch %d: pool %d, want %d", c.immediate, c.batch, got, c.want)
		}
	}
}
