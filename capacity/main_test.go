package capacity_test

import (
	"os"
	"testing"
)

// TestMain dispatches to helper processes that re-exec this test binary;
// otherwise it runs the tests. Each dispatch function returns false when
// its environment variable is unset.
func TestMain(m *testing.M) {
	if code, ok := runSlotsHelperProcess(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
