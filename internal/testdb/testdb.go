// Package testdb gives each test its own real PostgreSQL database.
//
// The server comes from TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable); `make test`
// sets it to a running server or to a throwaway one it starts. A migrated
// template database is built once per migration set (under an advisory lock,
// so parallel test binaries build it once) and each test gets a copy of it,
// dropped when the test ends. Runnable examples, which have no testing.TB,
// get theirs from ForExample and drop it themselves.
package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/callscribe/callscribe/internal/pgrole"
	"github.com/callscribe/callscribe/internal/pgsession"
	"github.com/callscribe/callscribe/migrations"
)

// DefaultURL is the server used when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ApplicationName is the application_name of the sessions of the pools
// it gives (pgsession: they are bounded idle in a transaction as the
// binary's are).
const ApplicationName = "callscribe test"

const templateLockKey int64 = 0x7465737464620001

// templateKeep is how long a template of another migration set is kept
// after its last use, so that checkouts of different branches can test
// against one server at once.
const templateKeep = 6 * time.Hour

// ServerURL returns the URL of the test server's maintenance database.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// New returns a pool on a fresh, fully migrated database of its own. The
// database is dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate() })
	if templateErr != nil {
		t.Fatalf("preparing the migrated template database: %v", templateErr)
	}
	return create(t, templateName)
}

// NewEmpty returns a pool on a fresh database with no tables at all, for tests
// of the migrations themselves.
func NewEmpty(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return create(t, "template0")
}

// URLOf returns a connection URL for the database behind pool, for tests that
// hand it to another process.
func URLOf(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return withDatabase(ServerURL(), pool.Config().ConnConfig.Database)
}

// RuntimeLogin is the login role AsRuntime connects as: a member of the
// runtime role and of nothing else.
const RuntimeLogin = "callscribe_test_runtime"

// AsRuntime returns a second pool on pool's database whose connections act
// as callscribe's runtime role (migrations.RuntimeRole), as the binary's
// do: SELECT and INSERT, UPDATE of the columns the state machines move,
// nothing more. It fails the test when the role is missing (the template's
// migration could not create it).
func AsRuntime(t testing.TB, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	if ok, err := pgrole.Usable(ctx, pool, migrations.RuntimeRole); err != nil || !ok {
		t.Fatalf("the role %s is not usable on the test server (%v): `callscribe migrate up` creates it when its user may create roles",
			migrations.RuntimeRole, err)
	}
	// A login of its own, member of the runtime role only, as a deployment
	// has: a superuser's session could SET ROLE to anything.
	if _, err := pool.Exec(ctx, `DO $$ BEGIN
		CREATE ROLE `+RuntimeLogin+` LOGIN IN ROLE `+migrations.RuntimeRole+`;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		t.Fatalf("creating the login %s: %v", RuntimeLogin, err)
	}
	cfg, err := pgxpool.ParseConfig(URLOf(t, pool))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = RuntimeLogin, ""
	pgsession.ApplyPool(cfg, ApplicationName)
	pgrole.Apply(cfg, migrations.RuntimeRole)
	rt, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

func create(t testing.TB, template string) *pgxpool.Pool {
	t.Helper()
	pool, drop, err := createDatabase(template)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Log(err)
		}
	})
	return pool
}

// ForExample is New for runnable examples, which have no testing.TB: it
// returns a pool on a fresh, fully migrated database of its own and a
// function that closes the pool and drops the database, to defer. It panics
// when the database cannot be made (the server is down), as an example has
// no other way to fail:
//
//	pool, drop := testdb.ForExample()
//	defer drop()
func ForExample() (*pgxpool.Pool, func()) {
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate() })
	if templateErr != nil {
		panic(fmt.Sprintf("preparing the migrated template database: %v", templateErr))
	}
	pool, drop, err := createDatabase(templateName)
	if err != nil {
		panic(err)
	}
	return pool, func() {
		if err := drop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// createDatabase copies template into a new database and returns a pool on
// it and the function that closes the pool and drops the database.
func createDatabase(template string) (*pgxpool.Pool, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := connectAdmin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = admin.Close(context.Background()) }()

	name := "callscribe_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, pgx.Identifier{template}.Sanitize())); err != nil {
		return nil, nil, fmt.Errorf("creating test database %s from %s: %w", name, template, err)
	}
	cfg, err := pgxpool.ParseConfig(ServerURL())
	if err != nil {
		return nil, nil, fmt.Errorf("parsing TEST_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 20
	pgsession.ApplyPool(cfg, ApplicationName)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to test database %s: %w", name, err)
	}
	drop := func() error {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			return fmt.Errorf("dropping test database %s: %w", name, err)
		}
		defer func() { _ = admin.Close(ctx) }()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping test database %s: %w", name, err)
		}
		return nil
	}
	return pool, drop, nil
}

func connectAdmin(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL is not reachable at %s: %w\n"+
			"Run the tests with `make test`, which reuses a running server or starts a throwaway one,\n"+
			"or start one (Debian: pg_ctlcluster 15 main start) and set TEST_DATABASE_URL", redact(ServerURL()), err)
	}
	return conn, nil
}

// ensureTemplate builds the migrated template database once per migration
// set; its name carries a digest of the migrations, so a change rebuilds it.
func ensureTemplate() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	digest, err := migrationDigest()
	if err != nil {
		return "", err
	}
	name := "callscribe_tmpl_" + digest
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return "", fmt.Errorf("PostgreSQL is not reachable at %s: %w (run the tests with `make test`, or set TEST_DATABASE_URL)", redact(ServerURL()), err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("taking the template lock: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) }()

	// Templates of other migration sets are of no further use once nobody
	// tests against them any more: another checkout (another branch) may
	// be testing against one right now, so only those unused for
	// templateKeep are dropped. Each use stamps the template's comment.
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database
		WHERE datname LIKE 'callscribe\_tmpl\_%' AND datname <> $1
		  AND coalesce(substring(shobj_description(oid, 'pg_database') FROM 'used (\d+)')::bigint, 0) < $2`,
		name, time.Now().Add(-templateKeep).Unix())
	if err != nil {
		return "", fmt.Errorf("listing old templates: %w", err)
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("listing old templates: %w", err)
	}
	for _, o := range old {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{o}.Sanitize()+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("dropping old template %s: %w", o, err)
		}
	}
	defer func() {
		// Best effort: a template whose stamp is not refreshed is dropped
		// a little earlier than it could be, and is rebuilt when needed.
		_, _ = admin.Exec(context.Background(), fmt.Sprintf("COMMENT ON DATABASE %s IS 'callscribe test template, used %d'",
			pgx.Identifier{name}.Sanitize(), time.Now().Unix()))
	}()
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("looking for template %s: %w", name, err)
	}
	if exists {
		return name, nil
	}
	building := name + "_b"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("dropping half-built template: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("creating template %s: %w", building, err)
	}
	cfg, err := pgxpool.ParseConfig(ServerURL())
	if err != nil {
		return "", fmt.Errorf("parsing TEST_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.Database = building
	pgsession.ApplyPool(cfg, ApplicationName)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connecting to template %s: %w", building, err)
	}
	_, err = migrations.New(pool, nil).Up(ctx)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrating template %s: %w", building, err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", fmt.Errorf("publishing template %s: %w", name, err)
	}
	return name, nil
}

func migrationDigest() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS(), p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing migrations: %w", err)
	}
	// So are the roles' grants, applied by every Up.
	create, grants := migrations.RolesSQL()
	fmt.Fprintf(h, "roles\x00%s\x00%s\x00", create, grants)
	// River's migrations are part of the template too.
	for _, m := range riverVersions() {
		fmt.Fprintf(h, "river\x00%d\x00%s\x00", m.Version, m.SQLUp)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func riverVersions() []rivermigrate.Migration {
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return nil
	}
	return m.AllVersions()
}

// withDatabase returns serverURL pointed at database db.
func withDatabase(serverURL, db string) string {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return serverURL + " dbname=" + db // keyword/value form: the last key wins
	}
	u.Path = "/" + db
	return u.String()
}

// redact hides a password in a URL before it reaches a test log.
func redact(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil || cfg.Password == "" {
		return u
	}
	return strings.Replace(u, cfg.Password, "xxxxx", 1)
}
