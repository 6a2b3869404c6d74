package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// stuckEnv makes the test binary act as a command that ignores its
// context: it prints "stopping" on the first signal and then hangs.
const stuckEnv = "CALLSCRIBE_SIGNAL_TEST_STUCK"

func TestMain(m *testing.M) {
	if os.Getenv(stuckEnv) != "" {
		ctx, stop := signalContext()
		defer stop()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("stopping\n")
		select {} // a command that never returns
	}
	os.Exit(m.Run())
}

// After the first SIGINT or SIGTERM has started the graceful stop, another
// one ends the process even though the command does not return.
func TestSecondSignalEndsTheProcess(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), stuckEnv+"=1")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || lines.Text() != "ready" {
				t.Fatalf("child did not start: %q", lines.Text())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if !lines.Scan() || lines.Text() != "stopping" {
				t.Fatalf("child did not start stopping: %q", lines.Text())
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// The default handling comes back just after the context is
			// cancelled: signal until the child ends, or the deadline.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				_ = cmd.Process.Signal(sig)
				select {
				case err := <-exited:
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						t.Fatalf("child exit: %v", err)
					}
					ws, ok := ee.Sys().(syscall.WaitStatus)
					if ctx.Err() != nil || !ok || !ws.Signaled() || ws.Signal() != sig {
						t.Fatalf("child ended with %v (deadline: %v), want killed by %v", err, ctx.Err(), sig)
					}
					return
				case <-tick.C:
				}
			}
		})
	}
}
