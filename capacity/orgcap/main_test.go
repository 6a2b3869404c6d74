package orgcap_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started (a
// Reloader's) is still running after the last one.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
