package devservice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outputTailSize is how many bytes of a child's combined output are kept to
// be quoted in errors.
const outputTailSize = 8 << 10

// maxUnixSocketPath is the longest unix socket path this package creates:
// sun_path holds 108 bytes on Linux and 104 on macOS, NUL included.
const maxUnixSocketPath = 103

// outputTail is an io.Writer that keeps the last outputTailSize bytes written
// to it and logs each complete line at debug level. It is safe for concurrent
// use, since exec may copy stdout and stderr from two goroutines.
type outputTail struct {
	logger  *slog.Logger
	service string

	mu      sync.Mutex
	buf     []byte
	partial []byte
}

func newOutputTail(logger *slog.Logger, service string) *outputTail {
	return &outputTail{logger: logger, service: service}
}

func (t *outputTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()

	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*outputTailSize {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-outputTailSize:]...)
	}

	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(t.partial[:i]), "\r"); line != "" {
			t.logger.Debug("child output", slog.String("service", t.service), slog.String("line", line))
		}
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > outputTailSize { // a very long line: log what we have
		t.logger.Debug("child output", slog.String("service", t.service), slog.String("line", string(t.partial)))
		t.partial = nil
	}
	return len(p), nil
}

// String returns the kept tail, starting at a line boundary when it was cut.
func (t *outputTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > outputTailSize {
		b = b[len(b)-outputTailSize:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

// withOutput appends a child's output tail to err, if there is any.
func withOutput(err error, out *outputTail) error {
	tail := out.String()
	if tail == "" {
		return err
	}
	return fmt.Errorf("%w\n--- %s output (tail) ---\n%s", err, out.service, tail)
}

// runAs names the unprivileged account a child runs as when we are root.
type runAs struct {
	name     string
	uid, gid uint32
}

// child is a long-running server process whose lifetime is tied to ours.
type child struct {
	name   string
	cmd    *exec.Cmd
	out    *outputTail
	logger *slog.Logger

	done    chan struct{} // closed when cmd.Wait has returned
	waitErr error         // set before done is closed
}

// childWaitDelay bounds how long Wait keeps reading output after the process
// exits, should a grandchild still hold the pipe open.
const childWaitDelay = 2 * time.Second

// startChild starts cmd in its own process group, killed if we die (Linux),
// with output going to out, and reaps it in the background.
func startChild(cmd *exec.Cmd, name string, out *outputTail, as *runAs, logger *slog.Logger) (*child, error) {
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = childWaitDelay
	setProcAttrs(cmd, as)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, out: out, logger: logger, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exitError describes how the child ended; call only after done is closed.
func (c *child) exitError() error {
	if c.waitErr == nil {
		return fmt.Errorf("%s exited with status 0", c.name)
	}
	return fmt.Errorf("%s exited: %w", c.name, c.waitErr)
}

// stop asks the child to exit with graceful, waits up to timeout (or until
// ctx is done), then kills its whole process group. Whatever happened, the
// child has been reaped when stop returns nil.
func (c *child) stop(ctx context.Context, graceful syscall.Signal, timeout time.Duration) error {
	select {
	case <-c.done:
		killProcessGroup(c.pid()) // stragglers, if any
		return nil
	default:
	}

	start := time.Now()
	if err := signalProcess(c.cmd.Process, graceful); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.logger.Warn("signalling child failed; killing it",
			slog.String("service", c.name), slog.Int("pid", c.pid()), slog.String("error", err.Error()))
	} else {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-c.done:
			killProcessGroup(c.pid())
			c.logger.Debug("child stopped", slog.String("service", c.name), slog.Int("pid", c.pid()),
				slog.Duration("elapsed", time.Since(start)))
			return nil
		case <-timer.C:
			c.logger.Warn("child did not stop in time; killing it", slog.String("service", c.name),
				slog.Int("pid", c.pid()), slog.Duration("timeout", timeout))
		case <-ctx.Done():
			c.logger.Warn("context done while stopping child; killing it", slog.String("service", c.name),
				slog.Int("pid", c.pid()), slog.String("cause", ctx.Err().Error()))
		}
	}

	killProcessGroup(c.pid())
	_ = c.cmd.Process.Kill() // on platforms without process groups
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) still running %s after SIGKILL", c.name, c.pid(), timeout)
	}
}

// childEnv is the environment for server children: ours, minus variables that
// would change how PostgreSQL tools behave, with a fixed C locale so that
// messages are English and initdb never trips over an uninstalled locale.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// makeServiceDir creates a fresh temporary directory named prefix-*, under
// os.TempDir, or under /tmp when that would make socketName's full path too
// long for a unix socket.
func makeServiceDir(prefix, socketName string) (string, error) {
	const randomSuffix = 10 // os.MkdirTemp appends up to 10 digits
	parents := []string{os.TempDir()}
	if os.TempDir() != "/tmp" {
		parents = append(parents, "/tmp")
	}
	for _, parent := range parents {
		if len(parent)+1+len(prefix)+randomSuffix+1+len(socketName) > maxUnixSocketPath {
			continue
		}
		dir, err := os.MkdirTemp(parent, prefix)
		if err != nil {
			return "", fmt.Errorf("creating temporary directory in %s: %w", parent, err)
		}
		return dir, nil
	}
	return "", fmt.Errorf("temporary directory %s is too long for a unix socket path (limit %d bytes) and /tmp is not usable; set TMPDIR to a short path",
		os.TempDir(), maxUnixSocketPath)
}
