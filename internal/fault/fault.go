//go:build callscribe_faults

// This file exists only in builds with -tags callscribe_faults: production
// binaries cannot reach it, whatever their configuration or environment.

package fault

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// EnvCrashAt names the crash points (comma-separated) at which a process
// built with the tag kills itself with SIGKILL. A point is name (the
// first time the process reaches it) or name@N (the N-th time, N ≥ 1).
const EnvCrashAt = "CALLSCRIBE_CRASH_AT"

var (
	mu      sync.Mutex
	reached = map[string]int{}
)

// Point kills the process when name is listed in CALLSCRIBE_CRASH_AT and
// this is the time it names.
func Point(name string) {
	mu.Lock()
	reached[name]++
	n := reached[name]
	mu.Unlock()
	for _, p := range strings.Split(os.Getenv(EnvCrashAt), ",") {
		p = strings.TrimSpace(p)
		at := 1
		if base, count, ok := strings.Cut(p, "@"); ok {
			c, err := strconv.Atoi(count)
			if err != nil || c < 1 {
				continue
			}
			p, at = base, c
		}
		if p == name && n == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
