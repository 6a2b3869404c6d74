package cli_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after the last one. Run with peerRoleEnv set, the test
// binary is instead one of BenchmarkThroughput's peer processes.
func TestMain(m *testing.M) {
	if role := os.Getenv(peerRoleEnv); role != "" {
		os.Exit(peerMain(role))
	}
	goleak.VerifyTestMain(m)
}
