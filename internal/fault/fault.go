//go:build callscribe_faults

// This file exists only in builds with -tags callscribe_faults: production
// binaries cannot reach it, whatever their configuration or environment.

package fault

import (
	"os"
	"strings"
	"syscall"
)

// EnvCrashAt names the crash points (comma-separated) at which a process
// built with the tag kills itself with SIGKILL, once each per process.
const EnvCrashAt = "CALLSCRIBE_CRASH_AT"

// Point kills the process when name is listed in CALLSCRIBE_CRASH_AT.
func Point(name string) {
	for _, p := range strings.Split(os.Getenv(EnvCrashAt), ",") {
		if strings.TrimSpace(p) == name {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
