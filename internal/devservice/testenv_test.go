//go:build unix

package devservice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

const (
	unreachableDatabaseURL = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"
	unreachableRedisURL    = "redis://127.0.0.1:1/0"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    situation
		want action
	}{
		{"reachable default", situation{Reachable: true}, actionReuse},
		{"reachable explicit", situation{Reachable: true, Explicit: true}, actionReuse},
		{"reachable wins over everything", situation{Reachable: true, Explicit: true, BinariesFound: true, Root: true, AptGet: true, AllowInstall: true}, actionReuse},
		{"explicit unreachable, binaries here", situation{Explicit: true, BinariesFound: true}, actionRefuse},
		{"explicit unreachable, could install", situation{Explicit: true, Root: true, AptGet: true, AllowInstall: true}, actionRefuse},
		{"default unreachable, binaries here", situation{BinariesFound: true}, actionStart},
		{"default unreachable, binaries here, could install", situation{BinariesFound: true, Root: true, AptGet: true, AllowInstall: true}, actionStart},
		{"no binaries, root, apt, allowed", situation{Root: true, AptGet: true, AllowInstall: true}, actionInstallStart},
		{"no binaries, root, apt, not allowed", situation{Root: true, AptGet: true}, actionFailNoBinary},
		{"no binaries, not root", situation{AptGet: true, AllowInstall: true}, actionFailNoBinary},
		{"no binaries, root, no apt (macOS, Alpine)", situation{Root: true, AllowInstall: true}, actionFailNoBinary},
		{"nothing at all", situation{}, actionFailNoBinary},
	}
	for _, tt := range tests {
		if got := decide(tt.s); got != tt.want {
			t.Errorf("%s: decide(%+v) = %s, want %s", tt.name, tt.s, got, tt.want)
		}
	}

	// Over every combination: only a reachable URL is reused, an explicit
	// URL is never replaced, and installing happens only when allowed, as
	// root, with apt-get, and needed.
	for bits := range 1 << 6 {
		s := situation{
			Reachable: bits&1 != 0, Explicit: bits&2 != 0, BinariesFound: bits&4 != 0,
			Root: bits&8 != 0, AptGet: bits&16 != 0, AllowInstall: bits&32 != 0,
		}
		got := decide(s)
		if (got == actionReuse) != s.Reachable {
			t.Errorf("decide(%+v) = %s: reuse iff reachable", s, got)
		}
		if s.Explicit && got != actionReuse && got != actionRefuse {
			t.Errorf("decide(%+v) = %s: an explicit URL is reused or refused", s, got)
		}
		if got == actionInstallStart && (!s.Root || !s.AptGet || !s.AllowInstall || s.BinariesFound) {
			t.Errorf("decide(%+v) = install without need or permission", s)
		}
	}
}

func TestDecideBrowser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    browserSituation
		want browserAction
	}{
		{"not wanted", browserSituation{Root: true, AptGet: true, AllowInstall: true}, browserSkip},
		{"found", browserSituation{Wanted: true, Found: true}, browserUse},
		{"found, could install", browserSituation{Wanted: true, Found: true, Root: true, AptGet: true, AllowInstall: true}, browserUse},
		{"missing, root, apt, allowed", browserSituation{Wanted: true, Root: true, AptGet: true, AllowInstall: true}, browserInstall},
		{"missing, root, apt, not allowed", browserSituation{Wanted: true, Root: true, AptGet: true}, browserAdvise},
		{"missing, not root", browserSituation{Wanted: true, AptGet: true, AllowInstall: true}, browserAdvise},
		{"missing, root, no apt (macOS, Alpine)", browserSituation{Wanted: true, Root: true, AllowInstall: true}, browserAdvise},
		{"missing, nothing else", browserSituation{Wanted: true}, browserAdvise},
	}
	for _, tt := range tests {
		if got := decideBrowser(tt.s); got != tt.want {
			t.Errorf("%s: decideBrowser(%+v) = %s, want %s", tt.name, tt.s, got, tt.want)
		}
	}

	// Over every combination: installing happens only when wanted, needed,
	// allowed, as root and with apt-get; a found browser is always used.
	for bits := range 1 << 5 {
		s := browserSituation{
			Wanted: bits&1 != 0, Found: bits&2 != 0, Root: bits&4 != 0, AptGet: bits&8 != 0, AllowInstall: bits&16 != 0,
		}
		got := decideBrowser(s)
		if (got == browserSkip) != !s.Wanted {
			t.Errorf("decideBrowser(%+v) = %s: skip iff not wanted", s, got)
		}
		if s.Wanted && s.Found && got != browserUse {
			t.Errorf("decideBrowser(%+v) = %s: a found browser is used", s, got)
		}
		if got == browserInstall && (!s.Wanted || s.Found || !s.Root || !s.AptGet || !s.AllowInstall) {
			t.Errorf("decideBrowser(%+v) = install without need or permission", s)
		}
	}
}

// TestResolver_Browser drives resolveBrowser with a fake installer and a
// fake lookup: the browser "appears" once apt-get install chromium succeeds.
func TestResolver_Browser(t *testing.T) {
	t.Parallel()
	const browserPath = "/usr/bin/chromium"
	notFound := errors.New("no Chromium found (tried [/usr/bin/chromium])")
	tests := []struct {
		name         string
		present      bool
		root         bool
		aptGet       bool
		allow        bool
		aptUpdated   bool // an earlier server install already ran apt-get update
		installFails int  // how many apt-get install runs fail
		updateFails  bool
		wantRan      []string
		wantPath     string
		wantOut      []string
	}{
		{name: "present", present: true, root: true, aptGet: true, allow: true, wantPath: browserPath},
		{
			name: "installed at once", root: true, aptGet: true, allow: true,
			wantRan:  []string{"install -y chromium"},
			wantPath: browserPath, wantOut: []string{"installing chromium with apt-get", "Chromium: installed at " + browserPath},
		},
		{
			name: "installed after apt-get update", root: true, aptGet: true, allow: true, installFails: 1,
			wantRan:  []string{"install -y chromium", "update", "install -y chromium"},
			wantPath: browserPath, wantOut: []string{"running apt-get update and trying again", "Chromium: installed at " + browserPath},
		},
		{
			name: "lists already updated: no second update", root: true, aptGet: true, allow: true, aptUpdated: true, installFails: 1,
			wantRan: []string{"install -y chromium"},
			wantOut: []string{"installing it failed", "running apt-get install -y chromium", "`sudo apt-get install -y chromium`"},
		},
		{
			name: "install fails twice", root: true, aptGet: true, allow: true, installFails: 2,
			wantRan: []string{"install -y chromium", "update", "install -y chromium"},
			wantOut: []string{"installing it failed", "browser test will fail without it", "`sudo apt-get install -y chromium`"},
		},
		{
			name: "update fails", root: true, aptGet: true, allow: true, installFails: 1, updateFails: true,
			wantRan: []string{"install -y chromium", "update"},
			wantOut: []string{"installing it failed", "running apt-get update"},
		},
		{
			name: "not allowed", root: true, aptGet: true,
			wantOut: []string{notFound.Error(), "browser test will fail without it", "`sudo apt-get install -y chromium`", "macOS", "google-chrome"},
		},
		{name: "not root", aptGet: true, allow: true, wantOut: []string{"browser test will fail without it", "`sudo apt-get install -y chromium`"}},
		{name: "no apt-get", root: true, allow: true, wantOut: []string{"browser test will fail without it", "macOS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			var ran []string
			installed, installFails := tt.present, tt.installFails
			r := &resolver{
				cfg:  TestEnvConfig{AllowInstall: tt.allow, Out: &out}.WithDefaults(),
				root: tt.root,
				run: func(_ context.Context, name string, args ...string) error {
					if name != aptGetPath {
						t.Errorf("ran %s, want %s", name, aptGetPath)
					}
					ran = append(ran, strings.Join(args, " "))
					switch {
					case args[0] == "update" && tt.updateFails:
						return errors.New("exit status 100")
					case args[0] == "install" && installFails > 0:
						installFails--
						return errors.New("exit status 100")
					case args[0] == "install":
						installed = true
					}
					return nil
				},
				findBrowser: func() (string, error) {
					if installed {
						return browserPath, nil
					}
					return "", notFound
				},
				aptUpdated: tt.aptUpdated,
			}
			if tt.aptGet {
				r.aptGet = aptGetPath
			}
			got := r.resolveBrowser(t.Context())
			t.Logf("progress:\n%s", out.String())
			if got != tt.wantPath {
				t.Errorf("resolveBrowser = %q, want %q", got, tt.wantPath)
			}
			if !slices.Equal(ran, tt.wantRan) {
				t.Errorf("ran %q, want %q", ran, tt.wantRan)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(out.String(), want) {
					t.Errorf("progress does not mention %q:\n%s", want, out.String())
				}
			}
			if tt.wantOut == nil && out.Len() != 0 {
				t.Errorf("progress with a browser present: %q", out.String())
			}
		})
	}

	// Without FindBrowser nothing is looked for, run or printed.
	var out strings.Builder
	r := &resolver{
		cfg:  TestEnvConfig{AllowInstall: true, Out: &out}.WithDefaults(),
		root: true, aptGet: aptGetPath,
		run: func(context.Context, string, ...string) error {
			t.Error("ran an installer without FindBrowser")
			return nil
		},
	}
	if got := r.resolveBrowser(t.Context()); got != "" || out.Len() != 0 {
		t.Errorf("resolveBrowser without FindBrowser = %q, printed %q; want nothing", got, out.String())
	}
}

func TestTestEnvConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		want TestEnvConfig
	}{
		{nil, TestEnvConfig{}},
		{map[string]string{"TEST_DATABASE_URL": "", "TEST_REDIS_URL": ""}, TestEnvConfig{}},
		{
			map[string]string{"TEST_DATABASE_URL": "postgres://x@db/app", "TEST_REDIS_URL": "redis://cache:6379/2"},
			TestEnvConfig{DatabaseURL: "postgres://x@db/app", DatabaseURLExplicit: true, RedisURL: "redis://cache:6379/2", RedisURLExplicit: true},
		},
		{map[string]string{"TEST_REDIS_URL": "redis://cache/0"}, TestEnvConfig{RedisURL: "redis://cache/0", RedisURLExplicit: true}},
	}
	for _, tt := range tests {
		got := TestEnvConfigFromEnv(func(k string) string { return tt.env[k] })
		if got.DatabaseURL != tt.want.DatabaseURL || got.DatabaseURLExplicit != tt.want.DatabaseURLExplicit ||
			got.RedisURL != tt.want.RedisURL || got.RedisURLExplicit != tt.want.RedisURLExplicit {
			t.Errorf("TestEnvConfigFromEnv(%v) = %+v, want %+v", tt.env, got, tt.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://app:s3cret@db:5432/app?sslmode=disable": "postgres://app:xxxxx@db:5432/app?sslmode=disable",
		"redis://:s3cret@cache:6379/0":                      "redis://:xxxxx@cache:6379/0",
		"host=db user=app password=s3cret dbname=app":       "host=db user=app password=xxxxx dbname=app",
		"postgres://db/app?password=s3cret&sslmode=require": "postgres://db/app?password=xxxxx&sslmode=require",
		TestDatabaseURLDefault:                              TestDatabaseURLDefault,
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// suiteServices returns the servers this test run was given (make test sets
// TEST_DATABASE_URL and TEST_REDIS_URL to running or throwaway servers; the
// defaults otherwise) and fails, saying how to start them, if they do not answer.
func suiteServices(t *testing.T) (dbURL, redisURL string) {
	t.Helper()
	dbURL, redisURL = cmp.Or(os.Getenv(TestDatabaseURLEnv), TestDatabaseURLDefault), cmp.Or(os.Getenv(TestRedisURLEnv), TestRedisURLDefault)
	if err := probePostgres(t.Context(), dbURL, ProbeTimeoutDefault); err != nil {
		t.Fatalf("no PostgreSQL at %s: %v (run `make test`, which starts one, or start it and set %s)", redactURL(dbURL), err, TestDatabaseURLEnv)
	}
	if err := probeRedis(t.Context(), redisURL, ProbeTimeoutDefault); err != nil {
		t.Fatalf("no Redis at %s: %v (run `make test`, which starts one, or start it and set %s)", redactURL(redisURL), err, TestRedisURLEnv)
	}
	return dbURL, redisURL
}

func TestResolveTestEnv_ReusesRunningServers(t *testing.T) {
	t.Parallel()
	dbURL, redisURL := suiteServices(t)
	var out strings.Builder
	env, err := ResolveTestEnv(t.Context(), TestEnvConfig{DatabaseURL: dbURL, RedisURL: redisURL, Out: &out, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("ResolveTestEnv: %v", err)
	}
	t.Logf("progress:\n%s", out.String())
	// Stop first: if something was started, the failures below say why.
	defer func() { _ = env.Stop(context.Background()) }()
	// A failure here after the probes above passed most likely means the
	// system servers stopped answering in between (say, another suite used
	// up max_connections); the progress lines quote the probe's error.
	if env.DatabaseURL != dbURL || env.DatabaseOrigin != OriginReused {
		t.Errorf("database = %s (%s), want %s reused; progress:\n%s", env.DatabaseURL, env.DatabaseOrigin, dbURL, out.String())
	}
	if env.RedisURL != redisURL || env.RedisOrigin != OriginReused {
		t.Errorf("redis = %s (%s), want %s reused; progress:\n%s", env.RedisURL, env.RedisOrigin, redisURL, out.String())
	}
	if env.postgres != nil || env.redis != nil {
		t.Errorf("ResolveTestEnv started servers although the defaults answer")
	}
	if strings.Contains(out.String(), "throwaway") {
		t.Errorf("progress mentions a throwaway server:\n%s", out.String())
	}
	// Stop has nothing of its own to stop, and never touches reused servers.
	if err := env.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func TestResolveTestEnv_StartsThrowawayServers(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	env, err := ResolveTestEnv(t.Context(), TestEnvConfig{
		DatabaseURL: unreachableDatabaseURL,
		RedisURL:    unreachableRedisURL,
		Out:         &out,
		Logger:      testLogger(t),
	})
	if err != nil {
		t.Fatalf("ResolveTestEnv: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop(context.Background()) })
	t.Logf("progress:\n%s", out.String())

	if env.DatabaseOrigin != OriginStarted || env.postgres == nil || env.DatabaseURL != env.postgres.URL() {
		t.Fatalf("database = %s (%s), want a started throwaway", env.DatabaseURL, env.DatabaseOrigin)
	}
	if env.RedisOrigin != OriginStarted || env.redis == nil || env.RedisURL != env.redis.URL() {
		t.Fatalf("redis = %s (%s), want a started throwaway", env.RedisURL, env.RedisOrigin)
	}
	for _, want := range []string{"no usable server at " + unreachableDatabaseURL, "no usable server at " + unreachableRedisURL, "psql -h", "redis-cli -s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress does not mention %q:\n%s", want, out.String())
		}
	}

	conn, err := pgx.Connect(t.Context(), env.DatabaseURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", env.DatabaseURL, err)
	}
	if _, err := conn.Exec(t.Context(), "CREATE TABLE t (id int)"); err != nil {
		t.Errorf("CREATE TABLE: %v", err)
	}
	_ = conn.Close(t.Context())
	exerciseRedis(t, env.RedisURL)

	pgDir, pgPID := env.postgres.Dir(), env.postgres.proc.pid()
	redisDir, redisPID := env.redis.Dir(), env.redis.proc.pid()
	if err := env.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	requireDirGone(t, pgDir)
	requireDirGone(t, redisDir)
	requireProcessGone(t, pgPID)
	requireProcessGone(t, redisPID)
	if err := env.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestResolveTestEnv_ExplicitUnreachableDatabase(t *testing.T) {
	t.Parallel()
	const url = "postgres://app:s3cret@127.0.0.1:1/app?sslmode=disable"
	var out strings.Builder
	env, err := ResolveTestEnv(t.Context(), TestEnvConfig{DatabaseURL: url, DatabaseURLExplicit: true, Out: &out})
	if err == nil {
		_ = env.Stop(context.Background())
		t.Fatal("ResolveTestEnv succeeded with an unreachable explicit TEST_DATABASE_URL")
	}
	t.Logf("error: %v", err)
	for _, want := range []string{"TEST_DATABASE_URL=postgres://app:xxxxx@127.0.0.1:1/app", "unreachable", "unset TEST_DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(out.String(), "s3cret") {
		t.Errorf("the password leaked: %v\n%s", err, out.String())
	}
	if out.Len() != 0 {
		t.Errorf("progress after refusing: %q", out.String())
	}
}

func TestResolveTestEnv_ExplicitUnreachableRedisStopsThrowawayPostgres(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	env, err := ResolveTestEnv(t.Context(), TestEnvConfig{
		DatabaseURL: unreachableDatabaseURL,
		RedisURL:    unreachableRedisURL, RedisURLExplicit: true,
		Out: &out,
	})
	if err == nil {
		_ = env.Stop(context.Background())
		t.Fatal("ResolveTestEnv succeeded with an unreachable explicit TEST_REDIS_URL")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "TEST_REDIS_URL="+unreachableRedisURL) {
		t.Errorf("error %q does not name TEST_REDIS_URL and its value", err)
	}
	dirs := serviceDirsIn(out.String())
	if len(dirs) == 0 {
		t.Fatalf("progress names no throwaway PostgreSQL:\n%s", out.String())
	}
	for _, dir := range dirs {
		requireDirGone(t, dir)
	}
}

func TestResolveTestEnv_InvalidURL(t *testing.T) {
	t.Parallel()
	_, err := ResolveTestEnv(t.Context(), TestEnvConfig{RedisURL: "http://not-redis", RedisURLExplicit: true})
	if err == nil || !strings.Contains(err.Error(), "TestEnvConfig.RedisURL") {
		t.Errorf("ResolveTestEnv with an http URL for Redis: %v, want an error naming the field", err)
	}
}

// TestResolver_InstallsMissingBinaries drives the install path with a fake
// installer: the binaries "appear" once apt-get install has run for them.
func TestResolver_InstallsMissingBinaries(t *testing.T) {
	t.Parallel()
	realPG, err := FindPostgresBinDir()
	if err != nil {
		t.Fatalf("%v (install the PostgreSQL server: apt-get install -y postgresql)", err)
	}
	realRedis, err := FindRedisServer()
	if err != nil {
		t.Fatalf("%v (install it: apt-get install -y redis-server)", err)
	}

	var mu sync.Mutex
	var ran []string
	installed := map[string]bool{}
	find := func(pkg, path string) func() (string, error) {
		return func() (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if !installed[pkg] {
				return "", fmt.Errorf("%s binaries %w; looked in: nowhere", pkg, ErrNotFound)
			}
			return path, nil
		}
	}
	var out strings.Builder
	cfg := TestEnvConfig{DatabaseURL: unreachableDatabaseURL, RedisURL: unreachableRedisURL, AllowInstall: true, Out: &out}.WithDefaults()
	r := &resolver{
		cfg:    cfg,
		root:   true,
		aptGet: "/usr/bin/apt-get",
		run: func(_ context.Context, name string, args ...string) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, name+" "+strings.Join(args, " "))
			if args[0] == "install" {
				installed[args[len(args)-1]] = true
			}
			return nil
		},
		findPostgres: find("postgresql", realPG),
		findRedis:    find("redis-server", realRedis),
	}
	env, err := r.resolve(t.Context())
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop(context.Background()) })
	t.Logf("progress:\n%s", out.String())

	want := []string{
		"/usr/bin/apt-get update",
		"/usr/bin/apt-get install -y postgresql",
		"/usr/bin/apt-get install -y redis-server",
	}
	if !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
	if env.DatabaseOrigin != OriginStarted || env.RedisOrigin != OriginStarted {
		t.Errorf("origins = %s, %s; want both started", env.DatabaseOrigin, env.RedisOrigin)
	}
	if err := env.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func TestResolver_MissingBinariesWithoutInstall(t *testing.T) {
	t.Parallel()
	notFound := func() (string, error) {
		return "", fmt.Errorf("PostgreSQL server binaries (initdb and postgres) %w; looked in: /usr/lib/postgresql/*/bin (no match)", ErrNotFound)
	}
	cfg := TestEnvConfig{DatabaseURL: unreachableDatabaseURL}.WithDefaults()
	r := &resolver{
		cfg:          cfg,
		root:         false,
		run:          func(context.Context, string, ...string) error { return errors.New("must not run") },
		findPostgres: notFound,
		findRedis:    notFound,
	}
	_, err := r.resolve(t.Context())
	if err == nil {
		t.Fatal("resolve succeeded without binaries")
	}
	t.Logf("error: %v", err)
	for _, want := range []string{
		"no usable server at " + unreachableDatabaseURL,
		"looked in: /usr/lib/postgresql/*/bin",
		"`sudo apt-get install -y postgresql`",
		"`brew install postgresql@15`",
		"set TEST_DATABASE_URL to a running server",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("error does not wrap ErrNotFound: %v", err)
	}
}

func TestResolveTestEnv_ConfiguredBinariesReplaceSearch(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	_, err := ResolveTestEnv(t.Context(), TestEnvConfig{
		DatabaseURL: unreachableDatabaseURL,
		Postgres:    PostgresConfig{BinDir: empty},
	})
	if err == nil {
		t.Fatal("ResolveTestEnv succeeded with an empty Postgres.BinDir")
	}
	if !strings.Contains(err.Error(), "TestEnvConfig.Postgres.BinDir "+empty+" lacks initdb and postgres") || !errors.Is(err, ErrNotFound) {
		t.Errorf("error %q does not say the configured BinDir lacks the binaries", err)
	}
}
