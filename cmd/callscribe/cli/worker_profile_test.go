package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
)

// worker --cpuprofile writes a pprof profile that ends when the worker
// stops; a file it cannot create is an error naming the flag.
func TestWorkerCPUProfile(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	env := map[string]string{config.EnvDatabaseURL: testdb.URLOf(t, pool)}
	dir := t.TempDir()
	code, _, stderr := run(t, context.Background(), env, "worker", "--cpuprofile", filepath.Join(dir, "missing", "cpu.pprof"))
	if code == 0 || !strings.Contains(stderr, "--cpuprofile") {
		t.Fatalf("an uncreatable profile: code %d, stderr %q", code, stderr)
	}
	profile := filepath.Join(dir, "cpu.pprof")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--cpuprofile", profile}, cli.Env{Stdout: &out, Stderr: &errOut, Getenv: envOf(env)})
	}()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(errOut.String(), "worker started") {
		select {
		case code := <-done:
			t.Fatalf("worker exited %d before starting: %s", code, errOut.String())
		case <-deadline:
			t.Fatalf("worker not started after 60s: %s", errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d: %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s of Ctrl-C")
	}
	b, err := os.ReadFile(profile)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a gzipped protobuf
		t.Fatalf("profile %s: %d bytes, %v", profile, len(b), err)
	}
}
