//go:build unix

package devservice

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStartPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	start := time.Now()
	pg, err := StartPostgres(ctx, PostgresConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Logf("StartPostgres took %s; URL %s; hint %s", time.Since(start), pg.URL(), pg.ConnectHint())
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })

	dir, pid := pg.Dir(), pg.proc.pid()
	requireDirExists(t, filepath.Join(dir, "data"))
	requireProcessRunning(t, pid)
	if len(filepath.Join(dir, ".s.PGSQL.5432")) > maxUnixSocketPath {
		t.Errorf("socket path under %s is too long", dir)
	}
	if os.Geteuid() == 0 {
		requireNotRoot(t, pid)
	}

	connConfig, err := pgx.ParseConfig(pg.URL())
	if err != nil {
		t.Fatalf("pgx.ParseConfig(%q): %v", pg.URL(), err)
	}
	if connConfig.Host != dir || connConfig.Port != 5432 || connConfig.User != "postgres" || connConfig.Database != "postgres" {
		t.Errorf("URL parses to host=%q port=%d user=%q database=%q; want host=%q port=5432 user=postgres database=postgres",
			connConfig.Host, connConfig.Port, connConfig.User, connConfig.Database, dir)
	}
	if want := "-h " + dir + " -p 5432 -U postgres postgres"; !strings.Contains(pg.ConnectHint(), want) {
		t.Errorf("ConnectHint() = %q, want it to contain %q", pg.ConnectHint(), want)
	}

	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatalf("SELECT version(): %v", err)
	}
	if !strings.HasPrefix(version, "PostgreSQL ") {
		t.Errorf("version() = %q, want PostgreSQL ...", version)
	}
	t.Logf("server: %s", version)
	if _, err := conn.Exec(ctx, "CREATE TABLE recording (id bigint PRIMARY KEY, title text NOT NULL)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO recording VALUES (1, 'première')"); err != nil {
		t.Fatalf("INSERT: %v", err)
	}
	var title string
	if err := conn.QueryRow(ctx, "SELECT title FROM recording WHERE id = 1").Scan(&title); err != nil || title != "première" {
		t.Errorf("SELECT title = %q, %v; want première", title, err)
	}
	var maxConns string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&maxConns); err != nil || maxConns != "200" {
		t.Errorf("max_connections = %q, %v; want 200", maxConns, err)
	}
	var listen string
	if err := conn.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen); err != nil || listen != "" {
		t.Errorf("listen_addresses = %q, %v; want empty (unix socket only)", listen, err)
	}
	// Leave the connection open: Stop's fast shutdown must end it.

	stopStart := time.Now()
	if err := pg.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(stopStart))
	requireDirGone(t, dir)
	requireProcessGone(t, pid)
	if err := conn.Ping(ctx); err == nil {
		t.Error("Ping on a connection to the stopped server succeeded")
	}
	_ = conn.Close(ctx)

	if err := pg.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v, want nil", err)
	}
}

// Restart ends every connection with a fast shutdown, leaves the server
// down for the time asked, and brings the same cluster back on the same
// socket: committed rows survive, the URL works again, and a restart after
// Stop is refused.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg, err := StartPostgres(ctx, PostgresConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	url, dir, oldPid := pg.URL(), pg.Dir(), pg.proc.pid()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// An open transaction the fast shutdown must roll back.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatal(err)
	}

	// Down for a moment: a client connecting meanwhile is refused.
	refused := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		c, err := pgx.Connect(ctx, url)
		if err == nil {
			_ = c.Close(ctx)
		}
		refused <- err
	}()
	if err := pg.Restart(ctx, time.Second); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := <-refused; err == nil {
		t.Error("a connection while the server was down succeeded")
	}
	newPid := pg.proc.pid()
	if newPid == oldPid {
		t.Errorf("the server's pid is still %d after Restart", oldPid)
	}
	requireProcessGone(t, oldPid)
	requireProcessRunning(t, newPid)
	if pg.URL() != url || pg.Dir() != dir {
		t.Errorf("Restart moved the server: URL %s → %s, Dir %s → %s", url, pg.URL(), dir, pg.Dir())
	}
	if err := tx.Commit(ctx); err == nil {
		t.Error("a transaction open across the restart committed")
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection opened before the restart still answers")
	}

	again, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting after Restart: %v", err)
	}
	var ids []int32
	rows, err := again.Query(ctx, "SELECT id FROM kept ORDER BY id")
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	_ = again.Close(ctx)
	if err != nil || len(ids) != 1 || ids[0] != 1 {
		t.Errorf("rows after Restart = %v, %v; want [1] (committed kept, open rolled back)", ids, err)
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	requireProcessGone(t, newPid)
	requireDirGone(t, dir)
	if err := pg.Restart(ctx, 0); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Restart after Stop = %v, want an error saying it was stopped", err)
	}
}

// requireNotRoot fails unless pid runs as a non-root user (Linux /proc).
func requireNotRoot(t *testing.T, pid int) {
	t.Helper()
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Logf("cannot read /proc status of %d (%v); not checking its user", pid, err)
		return
	}
	for _, line := range strings.Split(string(status), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "Uid:" {
			if fields[1] == "0" {
				t.Errorf("postgres (pid %d) runs as root", pid)
			}
			return
		}
	}
	t.Errorf("no Uid line in /proc/%d/status", pid)
}

func TestStartPostgres_RootWithoutRunAsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// Not root: the server runs as us and RunAsUser is ignored.
		pg, err := StartPostgres(t.Context(), PostgresConfig{RunAsUser: "callscribe-no-such-user"})
		if err != nil {
			t.Fatalf("as a non-root user RunAsUser must be ignored, got: %v", err)
		}
		if err := pg.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		return
	}
	_, err := StartPostgres(t.Context(), PostgresConfig{RunAsUser: "callscribe-no-such-user"})
	if err == nil {
		t.Fatal("StartPostgres succeeded with a user that does not exist")
	}
	for _, want := range []string{"refuses to run as root", `"callscribe-no-such-user"`, "useradd", "CALLSCRIBE_DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStartPostgres_BinDirWithoutPostgres(t *testing.T) {
	t.Parallel()
	_, err := StartPostgres(t.Context(), PostgresConfig{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "lacks initdb and postgres") {
		t.Errorf("StartPostgres with an empty BinDir: %v, want it to say what is missing", err)
	}
}

// fakePostgresBinDir returns a directory holding an initdb that creates the
// data directory and a postgres running script, readable by the account
// PostgreSQL runs as when we are root.
func fakePostgresBinDir(t *testing.T, postgresScript string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "devservice-fakepg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(dir, "initdb"), `mkdir -p "$2" && echo "fake initdb ran"`)
	writeScript(t, filepath.Join(dir, "postgres"), postgresScript)
	return dir
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestStartPostgres_ServerExitsEarly(t *testing.T) {
	t.Parallel()
	binDir := fakePostgresBinDir(t, `echo "FATAL:  fake failure for the test" >&2; exit 3`)

	_, err := StartPostgres(t.Context(), PostgresConfig{BinDir: binDir})
	if err == nil {
		t.Fatal("StartPostgres succeeded with a postgres that exits at once")
	}
	for _, want := range []string{"postgres exited", "exit status 3", "fake failure for the test"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	dirs := serviceDirsIn(err.Error())
	if len(dirs) == 0 {
		t.Fatalf("error %q names no directory", err)
	}
	for _, dir := range dirs {
		requireDirGone(t, dir)
	}
}

func TestStartPostgres_StartTimeout(t *testing.T) {
	t.Parallel()
	// A postgres that never listens; exec keeps the shell's pid, whose group
	// StartPostgres must kill.
	binDir := fakePostgresBinDir(t, `echo "pretending to start"; exec sleep 600`)

	start := time.Now()
	// Generous enough for the fake initdb to finish even on a loaded machine,
	// so that the timeout hits while waiting for the server.
	_, err := StartPostgres(t.Context(), PostgresConfig{BinDir: binDir, StartTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("StartPostgres succeeded with a postgres that never listens")
	}
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Errorf("StartPostgres took %s to give up, want about StartTimeout", elapsed)
	}
	for _, want := range []string{"deadline exceeded", "pretending to start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	for _, dir := range serviceDirsIn(err.Error()) {
		requireDirGone(t, dir)
	}
}

func TestPostgresConfig_Validate(t *testing.T) {
	t.Parallel()
	_, err := StartPostgres(t.Context(), PostgresConfig{StartTimeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "StartTimeout") {
		t.Errorf("negative StartTimeout: %v, want an error naming the field", err)
	}
}

func TestPostgresConfig_WithDefaults(t *testing.T) {
	t.Parallel()
	got := PostgresConfig{}.WithDefaults()
	if got.StartTimeout != 30*time.Second || got.StopTimeout != 10*time.Second || got.RunAsUser != "postgres" || got.Logger == nil || got.BinDir != "" {
		t.Errorf("PostgresConfig{}.WithDefaults() = %+v", got)
	}
	set := PostgresConfig{StartTimeout: time.Second, RunAsUser: "alice"}.WithDefaults()
	if set.StartTimeout != time.Second || set.RunAsUser != "alice" {
		t.Errorf("WithDefaults overrode set fields: %+v", set)
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/tmp/callscribe-pg-123": "/tmp/callscribe-pg-123",
		"/tmp/with space":        "'/tmp/with space'",
		"it's":                   `'it'\''s'`,
		"":                       "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
