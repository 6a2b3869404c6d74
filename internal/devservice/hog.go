package devservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HogEnv, set to any non-empty value in a process's environment, turns a
// program that calls RunHogIfAsked first thing into a CPU hog: it spins on
// one CPU until its standard input reaches end of file or it is killed.
// StartHogs sets it for the processes it starts.
const HogEnv = "CALLSCRIBE_CPU_HOG"

// hogStopTimeout bounds how long Hogs.Stop waits for a SIGKILLed hog to be
// reaped.
const hogStopTimeout = 5 * time.Second

// RunHogIfAsked returns at once unless HogEnv is set; then it never
// returns: the process spins on one CPU and exits when its standard input
// reaches end of file (the pipe StartHogs gives it closes when its parent
// stops it or dies, on any platform). A program that StartHogs may re-execute
// calls it before anything else.
func RunHogIfAsked() {
	if os.Getenv(HogEnv) == "" {
		return
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	spin()
}

// hogSpins is what a hog's loop counts, so the loop has work to do.
var hogSpins atomic.Uint64

// spin keeps one CPU busy forever. The loop allocates nothing, so the Go
// runtime's other threads stay idle; asynchronous preemption still lets the
// goroutine watching standard input run.
func spin() {
	for {
		hogSpins.Add(1)
	}
}

// ParseHogCount parses the testenv --hogs value: "" (the default) means no
// hogs; "0" or "cores" one per CPU (runtime.NumCPU()); a positive number
// that many.
func ParseHogCount(s string) (int, error) {
	switch s = strings.TrimSpace(s); s {
	case "":
		return 0, nil
	case "0", "cores":
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf(`--hogs %q: want a number of hogs, or 0 or "cores" for one per CPU (%d here)`, s, runtime.NumCPU())
	}
	return n, nil
}

// Hogs is a set of CPU hog processes started by StartHogs.
type Hogs struct {
	logger *slog.Logger

	mu       sync.Mutex
	children []*child
	stdins   []io.Closer
	stopped  bool
}

// StartHogs starts n CPU hogs: separate processes, each running argv with
// HogEnv=1 in its environment, so each spins on one CPU (argv's program must
// call RunHogIfAsked). A nil or empty argv re-executes this program
// (os.Executable). Each hog runs in its own process group, is SIGKILLed by
// the kernel should this process die first (Linux; elsewhere it exits when
// its standard input, a pipe from us, closes), and is reaped in the
// background. On error, the hogs already started have been stopped. n == 0
// starts nothing; Stop on the result is still fine.
func StartHogs(n int, argv []string, logger *slog.Logger) (*Hogs, error) {
	if n < 0 {
		return nil, fmt.Errorf("StartHogs: n must not be negative, got %d", n)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Hogs{logger: logger}
	if n == 0 {
		return h, nil
	}
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this program to run as a CPU hog: %w", err)
		}
		argv = []string{exe}
	}
	for i := range n {
		cmd := exec.Command(argv[0], argv[1:]...) //nolint:gosec // the caller's own program
		cmd.Env = append(os.Environ(), HogEnv+"=1")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("CPU hog %d: %w", i+1, err), h.Stop())
		}
		c, err := startChild(cmd, fmt.Sprintf("cpu hog %d", i+1), newOutputTail(logger, "cpu-hog"), nil, logger)
		if err != nil {
			_ = stdin.Close()
			return nil, errors.Join(err, h.Stop())
		}
		h.mu.Lock()
		h.children = append(h.children, c)
		h.stdins = append(h.stdins, stdin)
		h.mu.Unlock()
	}
	return h, nil
}

// Len returns how many hogs were started.
func (h *Hogs) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.children)
}

// Pids returns the hogs' process ids, each the leader of its process group.
func (h *Hogs) Pids() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	pids := make([]int, len(h.children))
	for i, c := range h.children {
		pids[i] = c.pid()
	}
	return pids
}

// Stop SIGKILLs every hog with its process group and waits until each has
// been reaped. It is idempotent and safe to call from several goroutines;
// later calls return at once.
func (h *Hogs) Stop() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil
	}
	h.stopped = true
	var errs []error
	for i, c := range h.children {
		_ = h.stdins[i].Close()
		ctx, cancel := context.WithTimeout(context.Background(), hogStopTimeout)
		errs = append(errs, c.stop(ctx, syscall.SIGKILL, hogStopTimeout))
		cancel()
	}
	return errors.Join(errs...)
}
