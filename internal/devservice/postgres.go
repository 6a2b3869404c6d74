package devservice

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// PostgresStartTimeoutDefault is PostgresConfig.StartTimeout's default.
	PostgresStartTimeoutDefault = 30 * time.Second
	// PostgresStopTimeoutDefault is PostgresConfig.StopTimeout's default.
	PostgresStopTimeoutDefault = 10 * time.Second
	// PostgresRunAsUserDefault is PostgresConfig.RunAsUser's default.
	PostgresRunAsUserDefault = "postgres"
	// PostgresMaxConnections is the max_connections of a throwaway server:
	// the test suite runs many packages, each with a pool, in parallel.
	PostgresMaxConnections = 200

	// postgresPort is only the socket file's name (.s.PGSQL.5432): the server
	// listens on no TCP port, so it never clashes with a system server.
	postgresPort = 5432
	// postgresSuperuser is the superuser initdb creates and URL connects as.
	postgresSuperuser = "postgres"
)

// PostgresConfig configures StartPostgres. The zero value is ready to use.
type PostgresConfig struct {
	// BinDir is the directory holding initdb and postgres.
	// Default "": FindPostgresBinDir.
	BinDir string

	// Logger receives progress at debug level, including every line the
	// server prints. Default nil: discard.
	Logger *slog.Logger

	// StartTimeout bounds the whole start: initdb plus waiting until the
	// server accepts connections. Default 0: PostgresStartTimeoutDefault (30s).
	StartTimeout time.Duration

	// StopTimeout is how long Stop waits after asking for a fast shutdown
	// (SIGINT) before it SIGKILLs the server's process group.
	// Default 0: PostgresStopTimeoutDefault (10s).
	StopTimeout time.Duration

	// RunAsUser is the unprivileged account initdb and postgres run as when
	// this process is root (PostgreSQL refuses to run as root). Ignored
	// otherwise: the server runs as us. The account must exist.
	// Default "": PostgresRunAsUserDefault ("postgres").
	RunAsUser string
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c PostgresConfig) WithDefaults() PostgresConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = PostgresStartTimeoutDefault
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = PostgresStopTimeoutDefault
	}
	if c.RunAsUser == "" {
		c.RunAsUser = PostgresRunAsUserDefault
	}
	return c
}

func (c PostgresConfig) validate() error {
	if c.StartTimeout < 0 {
		return fmt.Errorf("PostgresConfig.StartTimeout must not be negative, got %s", c.StartTimeout)
	}
	if c.StopTimeout < 0 {
		return fmt.Errorf("PostgresConfig.StopTimeout must not be negative, got %s", c.StopTimeout)
	}
	return nil
}

// Postgres is a throwaway PostgreSQL server: a fresh cluster in a temporary
// directory, reachable only over a unix socket in that directory, running as
// our child. Stop it with Stop; if this process dies first, Linux kills it.
type Postgres struct {
	dir    string
	binDir string
	logger *slog.Logger
	as     *runAs

	stopTimeout  time.Duration
	startTimeout time.Duration

	mu      sync.Mutex
	proc    *child // the running server; replaced by Restart
	stopped bool
}

// StartPostgres creates a cluster with initdb in a new temporary directory,
// starts postgres on it and returns once the server accepts connections.
// ctx bounds the start only, not the server's life. On error nothing is left
// behind, and the error quotes the tail of what initdb or postgres printed.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()

	binDir := cfg.BinDir
	if binDir == "" {
		var err error
		if binDir, err = FindPostgresBinDir(); err != nil {
			return nil, err
		}
	} else if missing := missingExecutables(binDir, "initdb", "postgres"); len(missing) > 0 {
		return nil, fmt.Errorf("PostgresConfig.BinDir %s lacks %s: %w", binDir, strings.Join(missing, " and "), ErrNotFound)
	}

	var as *runAs
	if os.Geteuid() == 0 {
		var err error
		if as, err = lookupRunAs(cfg.RunAsUser); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	dir, err := makeServiceDir("callscribe-pg-", fmt.Sprintf(".s.PGSQL.%d", postgresPort))
	if err != nil {
		return nil, fmt.Errorf("starting PostgreSQL: %w", err)
	}
	fail := func(err error) (*Postgres, error) {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			cfg.Logger.Warn("removing PostgreSQL directory failed", slog.String("dir", dir), slog.String("error", rmErr.Error()))
		}
		return nil, err
	}
	if as != nil {
		if err := chownTree(dir, as); err != nil {
			return fail(fmt.Errorf("handing %s to user %s: %w", dir, as.name, err))
		}
	}
	dataDir := filepath.Join(dir, "data")

	logger := cfg.Logger.With(slog.String("dir", dir))
	logger.Debug("running initdb", slog.String("bin_dir", binDir))
	initdbOut := newOutputTail(logger, "initdb")
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", dataDir, "-U", postgresSuperuser, "--auth=trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = childEnv()
	initdb.Stdout = initdbOut
	initdb.Stderr = initdbOut
	initdb.WaitDelay = childWaitDelay
	setProcAttrs(initdb, as)
	setGroupCancel(initdb)
	if err := initdb.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
		return fail(withOutput(fmt.Errorf("running initdb in %s: %w", dir, err), initdbOut))
	}
	initdbDone := time.Now()

	p := &Postgres{dir: dir, binDir: binDir, logger: logger, as: as, stopTimeout: cfg.StopTimeout, startTimeout: cfg.StartTimeout}
	if err := p.startServer(ctx); err != nil {
		return fail(err)
	}
	logger.Info("throwaway PostgreSQL ready",
		slog.Int("pid", p.proc.pid()),
		slog.Duration("initdb", initdbDone.Sub(start)),
		slog.Duration("total", time.Since(start)))
	return p, nil
}

// startServer starts postgres on the cluster in p.dir and waits until it
// accepts connections; on error no server is left running.
func (p *Postgres) startServer(ctx context.Context) error {
	dataDir := filepath.Join(p.dir, "data")
	postgresOut := newOutputTail(p.logger, "postgres")
	cmd := exec.Command(filepath.Join(p.binDir, "postgres"),
		"-D", dataDir,
		"-k", p.dir,
		"-p", strconv.Itoa(postgresPort),
		"-c", "listen_addresses=",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "synchronous_commit=off",
		"-c", "max_connections="+strconv.Itoa(PostgresMaxConnections),
	)
	cmd.Dir = p.dir
	cmd.Env = childEnv()
	proc, err := startChild(cmd, "postgres", postgresOut, p.as, p.logger)
	if err != nil {
		return err
	}
	p.proc = proc
	if err := p.waitReady(ctx, proc); err != nil {
		if stopErr := proc.stop(context.Background(), syscall.SIGKILL, p.stopTimeout); stopErr != nil {
			p.logger.Warn("killing PostgreSQL that failed to start", slog.String("error", stopErr.Error()))
		}
		return withOutput(err, postgresOut)
	}
	return nil
}

// waitReady polls with a real connection until one succeeds, the server
// (proc) exits, or ctx is done.
func (p *Postgres) waitReady(ctx context.Context, proc *child) error {
	connConfig, err := pgx.ParseConfig(p.URL())
	if err != nil {
		return fmt.Errorf("parsing PostgreSQL URL %s: %w", p.URL(), err)
	}
	var lastErr error
	delay := 10 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.ConnectConfig(attemptCtx, connConfig)
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err

		timer := time.NewTimer(delay)
		select {
		case <-proc.done:
			timer.Stop()
			return fmt.Errorf("waiting for PostgreSQL in %s to accept connections: %w", p.dir, proc.exitError())
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("waiting for PostgreSQL in %s to accept connections: %w; last attempt: %w", p.dir, ctx.Err(), lastErr)
		case <-timer.C:
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// URL returns a pgx-usable URL that connects as the superuser "postgres" to
// database "postgres" over the server's unix socket, such as
// postgres://postgres@/postgres?host=/tmp/callscribe-pg-123&port=5432&sslmode=disable.
func (p *Postgres) URL() string {
	host := strings.ReplaceAll(url.QueryEscape(p.dir), "%2F", "/")
	return fmt.Sprintf("postgres://%s@/postgres?host=%s&port=%d&sslmode=disable", postgresSuperuser, host, postgresPort)
}

// ConnectHint returns a psql command line a person can paste into a shell to
// reach this server.
func (p *Postgres) ConnectHint() string {
	psql := "psql"
	if _, err := exec.LookPath("psql"); err != nil && isExecutable(filepath.Join(p.binDir, "psql")) {
		psql = filepath.Join(p.binDir, "psql")
	}
	return fmt.Sprintf("%s -h %s -p %d -U %s postgres", shellQuote(psql), shellQuote(p.dir), postgresPort, postgresSuperuser)
}

// Dir returns the temporary directory holding the cluster ("data") and the
// unix socket. Stop removes it.
func (p *Postgres) Dir() string { return p.dir }

// Stop asks for a fast shutdown (SIGINT: roll back open transactions, close
// connections), waits up to PostgresConfig.StopTimeout or until ctx is done,
// then SIGKILLs the server's process group, and removes Dir. A ctx that is
// already done (say, cancelled by Ctrl-C) means SIGKILL at once, which is
// harmless for a throwaway; pass context.WithoutCancel(ctx) to still allow
// the fast shutdown. Calls after the first return nil at once; concurrent
// calls wait for the first.
func (p *Postgres) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true

	var errs []error
	if err := p.proc.stop(ctx, syscall.SIGINT, p.stopTimeout); err != nil {
		errs = append(errs, fmt.Errorf("stopping PostgreSQL in %s: %w", p.dir, err))
	}
	if err := os.RemoveAll(p.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing PostgreSQL directory: %w", err))
	}
	p.logger.Debug("throwaway PostgreSQL stopped")
	return errors.Join(errs...)
}

// Restart stops the server with a fast shutdown (SIGINT: open transactions
// roll back, every connection is closed), as Stop does but keeping Dir,
// leaves it down for down (0: not at all), then starts it again on the same
// cluster and socket, so URL stays valid and committed data stays. It
// returns once the server accepts connections again, within
// PostgresConfig.StartTimeout of starting it, or when ctx is done; until
// then clients are refused, as while a production server restarts. It is
// for tests of clients that must survive that. Restart after Stop is an
// error; concurrent calls run one after the other.
func (p *Postgres) Restart(ctx context.Context, down time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return fmt.Errorf("restarting PostgreSQL in %s: it was stopped", p.dir)
	}
	start := time.Now()
	if err := p.proc.stop(ctx, syscall.SIGINT, p.stopTimeout); err != nil {
		return fmt.Errorf("restarting PostgreSQL in %s: stopping: %w", p.dir, err)
	}
	if down > 0 {
		timer := time.NewTimer(down)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("restarting PostgreSQL in %s: stopped it, then %w before starting it again", p.dir, ctx.Err())
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.startTimeout)
	defer cancel()
	if err := p.startServer(ctx); err != nil {
		return fmt.Errorf("restarting PostgreSQL in %s: %w", p.dir, err)
	}
	p.logger.Info("throwaway PostgreSQL restarted", slog.Int("pid", p.proc.pid()), slog.Duration("total", time.Since(start)))
	return nil
}

// lookupRunAs resolves the account a root process runs PostgreSQL as.
func lookupRunAs(name string) (*runAs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and looking up user %q to run it as failed: %w; "+
			"create that user (e.g. `useradd --system --user-group %s`), set PostgresConfig.RunAsUser to another unprivileged user, "+
			"or set CALLSCRIBE_DATABASE_URL (TEST_DATABASE_URL for tests) to a running server", name, err, name)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing uid %q of user %s: %w", u.Uid, name, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing gid %q of user %s: %w", u.Gid, name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and user %q has uid 0; set PostgresConfig.RunAsUser to an unprivileged user", name)
	}
	return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// chownTree gives dir and everything under it to as.
func chownTree(dir string, as *runAs) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(as.uid), int(as.gid))
	})
}

// shellQuote quotes s for a POSIX shell when it holds anything but plainly
// safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
