//go:build linux

package devservice

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runHelper starts a server, prints "<pid> <dir>" and waits for stdin to
// close; the test SIGKILLs it first, as a crash would.
func runHelper(mode string) int {
	var pid int
	var dir string
	switch mode {
	case "postgres":
		pg, err := StartPostgres(context.Background(), PostgresConfig{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pid, dir = pg.proc.pid(), pg.Dir()
	case "redis-server":
		r, err := StartRedisServer(context.Background(), RedisConfig{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pid, dir = r.proc.pid(), r.Dir()
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	fmt.Printf("%d %s\n", pid, dir)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestServersDieWithUs checks the parent-death signal: when the process
// that started a server is SIGKILLed, without any chance to call Stop, the
// server (and its process group) goes too.
func TestServersDieWithUs(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"postgres", "redis-server"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			helper := exec.Command(os.Args[0], "-test.run=^$")
			helper.Env = append(os.Environ(), helperEnv+"="+mode)
			helper.Stderr = os.Stderr
			stdin, err := helper.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := helper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}

			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				_ = helper.Process.Kill()
				_ = helper.Wait()
				t.Fatalf("reading the helper's report: %v", err)
			}
			var pid int
			var dir string
			if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d %s", &pid, &dir); err != nil {
				t.Fatalf("parsing the helper's report %q: %v", line, err)
			}
			// The directory is left behind by design after a crash.
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			requireProcessRunning(t, pid)

			if err := helper.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = helper.Wait()

			eventually(t, 15*time.Second, func() (bool, string) {
				leader, group := syscall.Kill(pid, 0), syscall.Kill(-pid, 0)
				return errors.Is(leader, syscall.ESRCH) && errors.Is(group, syscall.ESRCH),
					fmt.Sprintf("%s (pid %d) or its group still there after its parent was killed: kill(pid, 0) = %v, kill(-pgid, 0) = %v", mode, pid, leader, group)
			})
		})
	}
}

// eventually polls cond every 20ms until it holds, failing the test with
// cond's last message if it still does not after within.
func eventually(t *testing.T, within time.Duration, cond func() (ok bool, msg string)) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("after %s: %s", within, msg)
		case <-tick.C:
		}
	}
}
