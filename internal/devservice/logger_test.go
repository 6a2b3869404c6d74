package devservice

import (
	"log/slog"
	"testing"
)

// testLogger logs at info level to the test's output. (Debug would add every
// line the servers print.)
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}
