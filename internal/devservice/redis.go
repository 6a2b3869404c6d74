package devservice

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
)

const (
	// RedisStartTimeoutDefault is RedisConfig.StartTimeout's default.
	RedisStartTimeoutDefault = 10 * time.Second
	// RedisStopTimeoutDefault is RedisConfig.StopTimeout's default.
	RedisStopTimeoutDefault = 10 * time.Second

	redisSocketName = "redis.sock"
)

// redisServerDirs are searched, in order, after PATH.
var redisServerDirs = []string{"/usr/bin", "/usr/local/bin", "/usr/sbin", "/opt/homebrew/bin"}

// RedisConfig configures StartRedisServer. The zero value is ready to use.
type RedisConfig struct {
	// ServerPath is the redis-server executable.
	// Default "": FindRedisServer.
	ServerPath string

	// Logger receives progress at debug level, including every line the
	// server prints. Default nil: discard.
	Logger *slog.Logger

	// StartTimeout bounds waiting until the server answers PING.
	// Default 0: RedisStartTimeoutDefault (10s).
	StartTimeout time.Duration

	// StopTimeout is how long Stop waits after SIGTERM before it SIGKILLs.
	// Default 0: RedisStopTimeoutDefault (10s).
	StopTimeout time.Duration
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c RedisConfig) WithDefaults() RedisConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = RedisStartTimeoutDefault
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = RedisStopTimeoutDefault
	}
	return c
}

func (c RedisConfig) validate() error {
	if c.StartTimeout < 0 {
		return fmt.Errorf("RedisConfig.StartTimeout must not be negative, got %s", c.StartTimeout)
	}
	if c.StopTimeout < 0 {
		return fmt.Errorf("RedisConfig.StopTimeout must not be negative, got %s", c.StopTimeout)
	}
	return nil
}

// Redis is a throwaway Redis: either an in-process miniredis (StartMiniredis)
// or a redis-server child process (StartRedisServer).
type Redis struct {
	url  string
	hint string
	dir  string // "" for miniredis

	mini *miniredis.Miniredis

	proc        *child
	stopTimeout time.Duration
	logger      *slog.Logger

	mu      sync.Mutex
	stopped bool
}

// URL returns a go-redis-usable URL: redis://127.0.0.1:PORT/0 for miniredis,
// unix:///tmp/callscribe-redis-123/redis.sock for redis-server.
func (r *Redis) URL() string { return r.url }

// ConnectHint returns a redis-cli command line a person can paste.
func (r *Redis) ConnectHint() string { return r.hint }

// Dir returns redis-server's temporary directory, which holds its socket and
// which Stop removes; "" for miniredis.
func (r *Redis) Dir() string { return r.dir }

// Stop shuts the server down and, for redis-server, removes Dir: SIGTERM,
// then SIGKILL after RedisConfig.StopTimeout. Calls after the first return
// nil at once; concurrent calls wait for the first.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true

	if r.mini != nil {
		r.mini.Close()
		return nil
	}
	var errs []error
	if err := r.proc.stop(context.Background(), syscall.SIGTERM, r.stopTimeout); err != nil {
		errs = append(errs, fmt.Errorf("stopping redis-server in %s: %w", r.dir, err))
	}
	if err := os.RemoveAll(r.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing redis-server directory: %w", err))
	}
	r.logger.Debug("throwaway redis-server stopped")
	return errors.Join(errs...)
}

// StartMiniredis starts an in-process github.com/alicebob/miniredis server on
// a free loopback port. It implements most commands, Lua included, but it is
// not Redis: prefer StartRedisServer where redis-server is installed.
func StartMiniredis() (*Redis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting miniredis on 127.0.0.1: %w", err)
	}
	host, port, err := net.SplitHostPort(m.Addr())
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("parsing miniredis address %q: %w", m.Addr(), err)
	}
	return &Redis{
		url:    fmt.Sprintf("redis://%s/0", m.Addr()),
		hint:   fmt.Sprintf("redis-cli -h %s -p %s", host, port),
		mini:   m,
		logger: slog.New(slog.DiscardHandler),
	}, nil
}

// FindRedisServer returns the path of a redis-server executable, looking on
// PATH, then in /usr/bin, /usr/local/bin, /usr/sbin and /opt/homebrew/bin.
// When there is none, the error wraps ErrNotFound and lists where it looked.
func FindRedisServer() (string, error) {
	return findRedisServer(os.Getenv("PATH"), redisServerDirs)
}

func findRedisServer(pathEnv string, dirs []string) (string, error) {
	var looked []string
	for _, dir := range append(filepath.SplitList(pathEnv), dirs...) {
		if dir == "" {
			continue
		}
		path := filepath.Join(dir, "redis-server")
		if isExecutable(path) {
			return path, nil
		}
		looked = append(looked, dir)
	}
	return "", fmt.Errorf("redis-server %w; looked in: %s", ErrNotFound, strings.Join(looked, ", "))
}

// StartRedisServer starts redis-server as our child in a new temporary
// directory, listening only on a unix socket there, with persistence off, and
// returns once it answers PING. ctx bounds the start only. On error nothing is
// left behind, and the error quotes the tail of what redis-server printed.
func StartRedisServer(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()

	server := cfg.ServerPath
	if server == "" {
		var err error
		if server, err = FindRedisServer(); err != nil {
			return nil, err
		}
	} else if !isExecutable(server) {
		return nil, fmt.Errorf("RedisConfig.ServerPath %s is not an executable file: %w", server, ErrNotFound)
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	dir, err := makeServiceDir("callscribe-redis-", redisSocketName)
	if err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	socket := filepath.Join(dir, redisSocketName)
	logger := cfg.Logger.With(slog.String("dir", dir))

	out := newOutputTail(logger, "redis-server")
	cmd := exec.Command(server,
		"--port", "0",
		"--unixsocket", socket,
		"--unixsocketperm", "700",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	)
	cmd.Dir = dir
	proc, err := startChild(cmd, "redis-server", out, nil, logger)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r := &Redis{
		url:         "unix://" + socket,
		hint:        "redis-cli -s " + shellQuote(socket),
		dir:         dir,
		proc:        proc,
		stopTimeout: cfg.StopTimeout,
		logger:      logger,
	}

	if err := waitRedisReady(ctx, socket, proc); err != nil {
		if stopErr := proc.stop(context.Background(), syscall.SIGKILL, cfg.StopTimeout); stopErr != nil {
			logger.Warn("killing redis-server that failed to start", slog.String("error", stopErr.Error()))
		}
		_ = os.RemoveAll(dir)
		return nil, withOutput(err, out)
	}
	logger.Info("throwaway redis-server ready", slog.Int("pid", proc.pid()), slog.Duration("elapsed", time.Since(start)))
	return r, nil
}

// waitRedisReady polls PING over the socket until it answers +PONG, the
// server exits, or ctx is done. It speaks RESP by hand so that readiness
// needs no client pool.
func waitRedisReady(ctx context.Context, socket string, proc *child) error {
	var lastErr error
	delay := 5 * time.Millisecond
	for {
		if lastErr = redisPing(ctx, socket); lastErr == nil {
			return nil
		}
		timer := time.NewTimer(delay)
		select {
		case <-proc.done:
			timer.Stop()
			return fmt.Errorf("waiting for redis-server to answer PING: %w", proc.exitError())
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("waiting for redis-server to answer PING: %w; last attempt: %w", ctx.Err(), lastErr)
		case <-timer.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

func redisPing(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return fmt.Errorf("sending PING: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading PING reply: %w", err)
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
