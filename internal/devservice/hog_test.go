//go:build unix

package devservice

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hogHelperArgv re-executes this test binary as a hog: with HogEnv set,
// TestMain spins (RunHogIfAsked) instead of running the tests.
func hogHelperArgv() []string {
	return []string{os.Args[0], "-test.run=^$"}
}

// TestHogsSpinAndStop starts two hogs, checks each runs in a process group
// of its own and burns CPU, stops them and checks nothing is left: neither
// the processes nor their groups, nor a goroutine of ours.
func TestHogsSpinAndStop(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	h, err := StartHogs(2, hogHelperArgv(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })
	pids := h.Pids()
	if len(pids) != 2 || h.Len() != 2 {
		t.Fatalf("StartHogs(2) started %d (pids %v), want 2", h.Len(), pids)
	}
	for _, pid := range pids {
		requireProcessRunning(t, pid)
	}
	if runtime.GOOS == "linux" {
		// 0.1 s of user CPU each: a sleeping process gathers none.
		const wantTicks = 10
		for _, pid := range pids {
			waitFor(t, 30*time.Second, func() (bool, string) {
				ticks, err := userTicks(pid)
				if err != nil {
					return false, err.Error()
				}
				return ticks >= wantTicks, fmt.Sprintf("hog %d used %d ticks of user CPU, want at least %d", pid, ticks, wantTicks)
			})
		}
	}

	if err := h.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, pid := range pids {
		requireProcessGone(t, pid)
	}
	if err := h.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestHogExitsWhenStdinCloses: a hog whose parent is gone (its pipe closed)
// exits by itself, where there is no parent-death signal to kill it.
func TestHogExitsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	argv := hogHelperArgv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), HogEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	_ = stdin.Close()
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("hog exited with %v, want status 0", waitErr)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("hog still spinning 30s after its standard input closed")
	}
}

func TestStartHogsZero(t *testing.T) {
	t.Parallel()
	h, err := StartHogs(0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 0 {
		t.Fatalf("StartHogs(0) started %d", h.Len())
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := StartHogs(-1, nil, nil); err == nil {
		t.Fatal("StartHogs(-1): no error")
	}
}

func TestParseHogCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"0", runtime.NumCPU(), false},
		{"cores", runtime.NumCPU(), false},
		{" 3 ", 3, false},
		{"1", 1, false},
		{"-1", 0, true},
		{"all", 0, true},
		{"1.5", 0, true},
	} {
		got, err := ParseHogCount(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseHogCount(%q) = %d, %v; want %d, error %t", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// userTicks reads a process's user CPU time, in clock ticks, from
// /proc/<pid>/stat (field 14, utime).
func userTicks(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, s)
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3, state
	if len(fields) < 12 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields in %q", pid, s)
	}
	return strconv.Atoi(fields[11])
}

// waitFor polls cond every 20ms until it holds, failing the test with
// cond's last message if it still does not after within.
func waitFor(t *testing.T, within time.Duration, cond func() (ok bool, msg string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
