package capacity_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain dispatches to helper processes that re-exec this test binary;
// otherwise it runs the tests, and fails them when a goroutine they
// started is still running after the last one. Each dispatch function
// returns false when its environment variable is unset.
func TestMain(m *testing.M) {
	if code, ok := runSlotsHelperProcess(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
