package devservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

const (
	// TestDatabaseURLEnv names the variable that points the tests at a
	// PostgreSQL server.
	TestDatabaseURLEnv = "TEST_DATABASE_URL"
	// TestRedisURLEnv names the variable that points the tests at a Redis.
	TestRedisURLEnv = "TEST_REDIS_URL"

	// TestDatabaseURLDefault is TestEnvConfig.DatabaseURL's default: a local
	// server as Debian's postgresql package or a CI service container runs it.
	TestDatabaseURLDefault = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	// TestRedisURLDefault is TestEnvConfig.RedisURL's default.
	TestRedisURLDefault = "redis://127.0.0.1:6379/0"
	// ProbeTimeoutDefault is TestEnvConfig.ProbeTimeout's default.
	ProbeTimeoutDefault = 2 * time.Second

	// aptGetPath is the installer ResolveTestEnv may run.
	aptGetPath = "/usr/bin/apt-get"
)

// TestEnvConfig configures ResolveTestEnv. The zero value probes the default
// URLs, starts throwaway servers if nothing answers there, and never installs.
type TestEnvConfig struct {
	// DatabaseURL is the PostgreSQL server to reuse if it answers.
	// Default "": TestDatabaseURLDefault.
	DatabaseURL string
	// DatabaseURLExplicit says a person chose DatabaseURL (TEST_DATABASE_URL
	// is set): if it does not answer, ResolveTestEnv fails rather than
	// start something else behind their back. Default false.
	DatabaseURLExplicit bool

	// RedisURL is the Redis to reuse if it answers.
	// Default "": TestRedisURLDefault.
	RedisURL string
	// RedisURLExplicit is DatabaseURLExplicit for RedisURL (TEST_REDIS_URL).
	// Default false.
	RedisURLExplicit bool

	// AllowInstall lets ResolveTestEnv run `apt-get update` and
	// `apt-get install -y postgresql` / `redis-server` when a server is
	// needed, its binaries are missing, this process is root and
	// /usr/bin/apt-get exists. Default false: fail with instructions instead.
	AllowInstall bool

	// FindBrowser looks for the Chromium the status page's browser test
	// drives, returning its path or an error saying it found none
	// (internal/cmd/testenv passes headless.Path; devservice does not import
	// the browser driver so that the callscribe binary stays without it).
	// When it finds none, ResolveTestEnv runs `apt-get install -y chromium`
	// (then `apt-get update` and again if that fails) if AllowInstall
	// permits, as for the servers, and otherwise prints to Out what to
	// install; either way it goes on, as the suite but for that one test
	// runs without a browser. Default nil: no browser is looked for.
	FindBrowser func() (string, error)

	// ProbeTimeout bounds each attempt to reach DatabaseURL and RedisURL.
	// Default 0: ProbeTimeoutDefault (2s).
	ProbeTimeout time.Duration

	// Postgres configures a throwaway PostgreSQL; a nil Logger becomes
	// Logger, and a set BinDir replaces FindPostgresBinDir.
	// Default: PostgresConfig's defaults.
	Postgres PostgresConfig
	// Redis configures a throwaway redis-server; a nil Logger becomes
	// Logger, and a set ServerPath replaces FindRedisServer.
	// Default: RedisConfig's defaults.
	Redis RedisConfig

	// Logger receives structured progress. Default nil: discard.
	Logger *slog.Logger
	// Out receives progress lines meant for a person, and apt-get's output.
	// Default nil: discard.
	Out io.Writer
}

// TestEnvConfigFromEnv builds a TestEnvConfig from TEST_DATABASE_URL and
// TEST_REDIS_URL as getenv (usually os.Getenv) reports them: a non-empty
// value is used and marked explicit; an empty or unset one leaves the default.
func TestEnvConfigFromEnv(getenv func(string) string) TestEnvConfig {
	var cfg TestEnvConfig
	if v := getenv(TestDatabaseURLEnv); v != "" {
		cfg.DatabaseURL, cfg.DatabaseURLExplicit = v, true
	}
	if v := getenv(TestRedisURLEnv); v != "" {
		cfg.RedisURL, cfg.RedisURLExplicit = v, true
	}
	return cfg
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c TestEnvConfig) WithDefaults() TestEnvConfig {
	if c.DatabaseURL == "" {
		c.DatabaseURL = TestDatabaseURLDefault
	}
	if c.RedisURL == "" {
		c.RedisURL = TestRedisURLDefault
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = ProbeTimeoutDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Postgres.Logger == nil {
		c.Postgres.Logger = c.Logger
	}
	if c.Redis.Logger == nil {
		c.Redis.Logger = c.Logger
	}
	return c
}

func (c TestEnvConfig) validate() error {
	if c.ProbeTimeout < 0 {
		return fmt.Errorf("TestEnvConfig.ProbeTimeout must not be negative, got %s", c.ProbeTimeout)
	}
	if _, err := pgx.ParseConfig(c.DatabaseURL); err != nil {
		return fmt.Errorf("TestEnvConfig.DatabaseURL (%s) %s is not a valid PostgreSQL URL: %w", TestDatabaseURLEnv, redactURL(c.DatabaseURL), err)
	}
	if _, err := redis.ParseURL(c.RedisURL); err != nil {
		return fmt.Errorf("TestEnvConfig.RedisURL (%s) %s is not a valid Redis URL: %w", TestRedisURLEnv, redactURL(c.RedisURL), err)
	}
	if err := c.Postgres.validate(); err != nil {
		return err
	}
	return c.Redis.validate()
}

// Origin says where a TestEnv server came from.
type Origin string

const (
	// OriginReused: a server already answered at the configured URL; Stop
	// leaves it alone.
	OriginReused Origin = "reused"
	// OriginStarted: nothing answered at the default URL, so a throwaway
	// server was started (after installing it, if allowed and needed); Stop
	// stops it and removes its files.
	OriginStarted Origin = "started"
)

// TestEnv is the PostgreSQL and Redis the test suite runs against.
type TestEnv struct {
	// DatabaseURL is a pgx-usable URL of the PostgreSQL server.
	DatabaseURL string
	// DatabaseOrigin says whether that server was reused or started.
	DatabaseOrigin Origin
	// RedisURL is a go-redis-usable URL of the Redis.
	RedisURL string
	// RedisOrigin says whether that Redis was reused or started.
	RedisOrigin Origin

	// Browser is the Chromium FindBrowser found (after installing it, if
	// it did), or "" when it found none or was nil.
	Browser string

	postgres *Postgres // nil unless started
	redis    *Redis    // nil unless started
}

// Stop stops the servers ResolveTestEnv started and removes their files;
// reused ones are left running. It is idempotent.
func (e *TestEnv) Stop(ctx context.Context) error {
	var errs []error
	if e.redis != nil {
		errs = append(errs, e.redis.Stop())
	}
	if e.postgres != nil {
		errs = append(errs, e.postgres.Stop(ctx))
	}
	return errors.Join(errs...)
}

// ResolveTestEnv finds a PostgreSQL and a Redis for the test suite, for each
// in turn: reuse the server at the configured URL if it answers within
// ProbeTimeout; fail if it does not and the URL was chosen explicitly; else
// start a throwaway one from installed binaries; else install them with
// apt-get if AllowInstall permits; else fail, saying what to install. On
// error, whatever it started has been stopped.
func ResolveTestEnv(ctx context.Context, cfg TestEnvConfig) (*TestEnv, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &resolver{
		cfg:  cfg,
		root: os.Geteuid() == 0,
		run:  runStreaming(cfg.Out),

		findPostgres: FindPostgresBinDir,
		findRedis:    FindRedisServer,
		findBrowser:  cfg.FindBrowser,
	}
	if dir := cfg.Postgres.BinDir; dir != "" {
		r.findPostgres = func() (string, error) {
			if missing := missingExecutables(dir, "initdb", "postgres"); len(missing) > 0 {
				return "", fmt.Errorf("TestEnvConfig.Postgres.BinDir %s lacks %s: %w", dir, strings.Join(missing, " and "), ErrNotFound)
			}
			return dir, nil
		}
	}
	if path := cfg.Redis.ServerPath; path != "" {
		r.findRedis = func() (string, error) {
			if !isExecutable(path) {
				return "", fmt.Errorf("TestEnvConfig.Redis.ServerPath %s is not an executable file: %w", path, ErrNotFound)
			}
			return path, nil
		}
	}
	if isExecutable(aptGetPath) {
		r.aptGet = aptGetPath
	}
	return r.resolve(ctx)
}

// action is what ResolveTestEnv does about one server.
type action int

const (
	actionReuse        action = iota + 1 // use the server at the URL
	actionRefuse                         // fail: the explicitly chosen URL does not answer
	actionStart                          // start a throwaway from installed binaries
	actionInstallStart                   // install with apt-get, then start a throwaway
	actionFailNoBinary                   // fail, saying what to install
)

func (a action) String() string {
	switch a {
	case actionReuse:
		return "reuse"
	case actionRefuse:
		return "refuse"
	case actionStart:
		return "start"
	case actionInstallStart:
		return "install+start"
	case actionFailNoBinary:
		return "fail-no-binary"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// situation is what decide needs to know about one server.
type situation struct {
	Reachable     bool // something answered at the URL
	Explicit      bool // a person chose the URL
	BinariesFound bool // the server's binaries are installed
	Root          bool // we run as root
	AptGet        bool // /usr/bin/apt-get exists
	AllowInstall  bool // TestEnvConfig.AllowInstall
}

// decide is ResolveTestEnv's policy, kept pure so it can be table-tested.
func decide(s situation) action {
	switch {
	case s.Reachable:
		return actionReuse
	case s.Explicit:
		return actionRefuse
	case s.BinariesFound:
		return actionStart
	case s.Root && s.AptGet && s.AllowInstall:
		return actionInstallStart
	default:
		return actionFailNoBinary
	}
}

// browserAction is what ResolveTestEnv does about the browser.
type browserAction int

const (
	browserUse     browserAction = iota + 1 // a browser is installed: use it
	browserInstall                          // install it with apt-get, then use it
	browserAdvise                           // print what to install and go on without it
	browserSkip                             // no FindBrowser: do not look
)

func (a browserAction) String() string {
	switch a {
	case browserUse:
		return "use"
	case browserInstall:
		return "install"
	case browserAdvise:
		return "advise"
	case browserSkip:
		return "skip"
	}
	return fmt.Sprintf("browserAction(%d)", int(a))
}

// browserSituation is what decideBrowser needs to know.
type browserSituation struct {
	Wanted       bool // TestEnvConfig.FindBrowser is set
	Found        bool // FindBrowser found one
	Root         bool // we run as root
	AptGet       bool // /usr/bin/apt-get exists
	AllowInstall bool // TestEnvConfig.AllowInstall
}

// decideBrowser is ResolveTestEnv's browser policy, kept pure so it can be
// table-tested. Unlike a missing server, a missing browser never fails the
// run: only the browser test needs it, and it fails saying so.
func decideBrowser(s browserSituation) browserAction {
	switch {
	case !s.Wanted:
		return browserSkip
	case s.Found:
		return browserUse
	case s.Root && s.AptGet && s.AllowInstall:
		return browserInstall
	default:
		return browserAdvise
	}
}

// browserAptPackage is Debian's Chromium, what internal/headless looks for.
const browserAptPackage = "chromium"

// resolver carries ResolveTestEnv's state; its fields are what tests replace.
type resolver struct {
	cfg          TestEnvConfig
	root         bool
	aptGet       string                                                       // "" when absent
	run          func(ctx context.Context, name string, args ...string) error // runs installer commands
	findPostgres func() (string, error)
	findRedis    func() (string, error)
	findBrowser  func() (string, error) // nil: no browser is looked for

	aptUpdated bool
}

// service describes one of the two servers to resolve.
type service struct {
	name        string // for people: "PostgreSQL", "Redis"
	envVar      string
	url         string
	explicit    bool
	aptPackage  string
	brewPackage string
	probe       func(ctx context.Context) error
	find        func() (string, error)
	start       func(ctx context.Context, found string) (url, hint string, err error)
}

func (r *resolver) resolve(ctx context.Context) (*TestEnv, error) {
	cfg := r.cfg
	env := &TestEnv{}

	pg := service{
		name: "PostgreSQL", envVar: TestDatabaseURLEnv, url: cfg.DatabaseURL, explicit: cfg.DatabaseURLExplicit,
		aptPackage: "postgresql", brewPackage: "postgresql@15",
		probe: func(ctx context.Context) error { return probePostgres(ctx, cfg.DatabaseURL, cfg.ProbeTimeout) },
		find:  r.findPostgres,
		start: func(ctx context.Context, binDir string) (string, string, error) {
			pcfg := cfg.Postgres
			pcfg.BinDir = binDir
			p, err := StartPostgres(ctx, pcfg)
			if err != nil {
				return "", "", err
			}
			env.postgres = p
			return p.URL(), p.ConnectHint(), nil
		},
	}
	var err error
	if env.DatabaseURL, env.DatabaseOrigin, err = r.resolveService(ctx, pg); err != nil {
		return nil, err
	}

	rd := service{
		name: "Redis", envVar: TestRedisURLEnv, url: cfg.RedisURL, explicit: cfg.RedisURLExplicit,
		aptPackage: "redis-server", brewPackage: "redis",
		probe: func(ctx context.Context) error { return probeRedis(ctx, cfg.RedisURL, cfg.ProbeTimeout) },
		find:  r.findRedis,
		start: func(ctx context.Context, path string) (string, string, error) {
			rcfg := cfg.Redis
			rcfg.ServerPath = path
			s, err := StartRedisServer(ctx, rcfg)
			if err != nil {
				return "", "", err
			}
			env.redis = s
			return s.URL(), s.ConnectHint(), nil
		},
	}
	if env.RedisURL, env.RedisOrigin, err = r.resolveService(ctx, rd); err != nil {
		if stopErr := env.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			cfg.Logger.Warn("stopping the throwaway PostgreSQL after failing to resolve Redis", slog.String("error", stopErr.Error()))
		}
		return nil, err
	}
	env.Browser = r.resolveBrowser(ctx)
	return env, nil
}

// resolveBrowser finds the browser, installing it if decideBrowser says
// so, and returns its path, or "" after printing what to install. It never
// fails: the tests but the browser test run without one.
func (r *resolver) resolveBrowser(ctx context.Context) string {
	cfg := r.cfg
	sit := browserSituation{
		Wanted:       r.findBrowser != nil,
		Root:         r.root,
		AptGet:       r.aptGet != "",
		AllowInstall: cfg.AllowInstall,
	}
	var path string
	var findErr error
	if sit.Wanted {
		path, findErr = r.findBrowser()
		sit.Found = findErr == nil
	}
	act := decideBrowser(sit)
	cfg.Logger.Debug("resolving the test browser", slog.Any("situation", sit), slog.String("action", act.String()))

	switch act {
	case browserSkip:
		return ""
	case browserUse:
		return path
	case browserInstall:
		fmt.Fprintf(cfg.Out, "Chromium: %v; installing %s with apt-get for the status page's browser test\n", findErr, browserAptPackage)
		err := r.aptInstallRetry(ctx, browserAptPackage)
		if err == nil {
			if path, findErr = r.findBrowser(); findErr == nil {
				fmt.Fprintf(cfg.Out, "Chromium: installed at %s\n", path)
				return path
			}
			err = fmt.Errorf("installed %s with apt-get, but still: %w", browserAptPackage, findErr)
		}
		fmt.Fprintf(cfg.Out, "Chromium: installing it failed: %v\nChromium: the status page's browser test will fail without it; %s\n", err, browserAdvice)
		return ""
	default: // browserAdvise
		fmt.Fprintf(cfg.Out, "Chromium: %v\nChromium: the status page's browser test will fail without it; %s\n", findErr, browserAdvice)
		return ""
	}
}

// browserAdvice says how to install a browser internal/headless finds: it
// tries /usr/bin/chromium, /usr/bin/chromium-browser, then chromium and
// google-chrome on PATH (headless.Candidates), and takes no variable naming
// another path.
const browserAdvice = "install one: `sudo apt-get install -y chromium` (Debian/Ubuntu; `make test` does it when run as root), " +
	"or on macOS Chromium or Google Chrome, with an executable named `chromium` or `google-chrome` on PATH that starts it " +
	"(the browser test takes no variable naming its path)"

func (r *resolver) resolveService(ctx context.Context, s service) (string, Origin, error) {
	cfg := r.cfg
	shown := redactURL(s.url)
	probeErr := s.probe(ctx)
	sit := situation{
		Reachable:    probeErr == nil,
		Explicit:     s.explicit,
		Root:         r.root,
		AptGet:       r.aptGet != "",
		AllowInstall: cfg.AllowInstall,
	}
	var found string
	var findErr error
	if !sit.Reachable && !sit.Explicit {
		found, findErr = s.find()
		sit.BinariesFound = findErr == nil
	}
	act := decide(sit)
	cfg.Logger.Debug("resolving test service", slog.String("service", s.name), slog.String("url", shown),
		slog.Any("situation", sit), slog.String("action", act.String()))

	switch act {
	case actionReuse:
		fmt.Fprintf(cfg.Out, "%s: reusing the server at %s\n", s.name, shown)
		return s.url, OriginReused, nil
	case actionRefuse:
		return "", "", fmt.Errorf("%s=%s is set, but %s is unreachable there: %w. Start that server, or unset %s to let the tests use %s and otherwise start a throwaway server",
			s.envVar, shown, s.name, probeErr, s.envVar, redactURL(defaultURL(s.envVar)))
	case actionFailNoBinary:
		return "", "", fmt.Errorf("no %s for the tests: no usable server at %s (%w), and %w. Install them: `sudo apt-get install -y %s` (Debian/Ubuntu) or `brew install %s` (macOS), or set %s to a running server",
			s.name, shown, probeErr, findErr, s.aptPackage, s.brewPackage, s.envVar)
	case actionInstallStart:
		fmt.Fprintf(cfg.Out, "%s: no usable server at %s (%v), and no server binaries are installed; installing %s with apt-get\n", s.name, shown, probeErr, s.aptPackage)
		if err := r.aptInstall(ctx, s.aptPackage); err != nil {
			return "", "", fmt.Errorf("installing %s for the tests: %w", s.name, err)
		}
		if found, findErr = s.find(); findErr != nil {
			return "", "", fmt.Errorf("installed %s with apt-get, but still: %w", s.aptPackage, findErr)
		}
	case actionStart:
		fmt.Fprintf(cfg.Out, "%s: no usable server at %s (%v); starting a throwaway server from %s\n", s.name, shown, probeErr, found)
	}

	start := time.Now()
	u, hint, err := s.start(ctx, found)
	if err != nil {
		return "", "", fmt.Errorf("starting a throwaway %s for the tests: %w", s.name, err)
	}
	fmt.Fprintf(cfg.Out, "%s: throwaway server ready in %s at %s (connect: %s)\n", s.name, time.Since(start).Round(time.Millisecond), u, hint)
	return u, OriginStarted, nil
}

// aptInstall runs `apt-get update` (once per resolve) and
// `apt-get install -y pkg`.
func (r *resolver) aptInstall(ctx context.Context, pkg string) error {
	if !r.aptUpdated {
		if err := r.run(ctx, r.aptGet, "update"); err != nil {
			return fmt.Errorf("running apt-get update: %w", err)
		}
		r.aptUpdated = true
	}
	if err := r.run(ctx, r.aptGet, "install", "-y", pkg); err != nil {
		return fmt.Errorf("running apt-get install -y %s: %w", pkg, err)
	}
	return nil
}

// aptInstallRetry runs `apt-get install -y pkg` and, if that fails and
// this resolve has not run `apt-get update` yet, `apt-get update` and the
// install again: the package lists are usually fresh enough, and updating
// them first every time costs a download.
func (r *resolver) aptInstallRetry(ctx context.Context, pkg string) error {
	err := r.run(ctx, r.aptGet, "install", "-y", pkg)
	if err == nil {
		return nil
	}
	if r.aptUpdated {
		return fmt.Errorf("running apt-get install -y %s: %w", pkg, err)
	}
	fmt.Fprintf(r.cfg.Out, "apt-get install -y %s failed (%v); running apt-get update and trying again\n", pkg, err)
	return r.aptInstall(ctx, pkg)
}

// runStreaming returns a runner whose commands are non-interactive and print
// to out.
func runStreaming(out io.Writer) func(ctx context.Context, name string, args ...string) error {
	return func(ctx context.Context, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout = out
		cmd.Stderr = out
		return cmd.Run()
	}
}

// probePostgres connects to url and pings within timeout.
func probePostgres(ctx context.Context, rawURL string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	connConfig, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return fmt.Errorf("parsing URL: %w", err)
	}
	connConfig.ConnectTimeout = timeout
	conn, err := pgx.ConnectConfig(ctx, connConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

// probeRedis connects to url and sends PING (after AUTH and SELECT, if the
// URL asks for them) within timeout, without retries.
func probeRedis(ctx context.Context, rawURL string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("parsing URL: %w", err)
	}
	// Dial once by hand first: go-redis retries a failed dial five times and
	// logs each failure on its global logger, which is noise for a probe
	// whose usual "failure" is that nothing listens.
	var d net.Dialer
	conn, err := d.DialContext(ctx, opts.Network, opts.Addr)
	if err != nil {
		return err
	}
	_ = conn.Close()

	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = timeout, timeout, timeout
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.PoolSize = 1
	opts.Protocol = 2
	opts.DisableIdentity = true
	client := redis.NewClient(opts)
	defer client.Close()
	return client.Ping(ctx).Err()
}

func defaultURL(envVar string) string {
	if envVar == TestRedisURLEnv {
		return TestRedisURLDefault
	}
	return TestDatabaseURLDefault
}

var passwordParam = regexp.MustCompile(`(?i)(password=)[^\s&]*`)

// RedactURL hides the password of a URL or of a key=value connection string,
// so it can be printed and logged.
func RedactURL(s string) string { return redactURL(s) }

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Opaque == "" {
		s = u.Redacted()
	}
	return passwordParam.ReplaceAllString(s, "${1}xxxxx")
}
