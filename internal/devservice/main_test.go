package devservice

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// helperEnv, when set in the environment, turns the test binary into a
// helper process instead of running tests (see crash_linux_test.go).
const helperEnv = "DEVSERVICE_TEST_HELPER"

func TestMain(m *testing.M) {
	RunHogIfAsked() // a hog started by the hog tests spins here and never returns
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}
