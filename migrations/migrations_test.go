package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/migrations"
)

// The second process of TestUpConcurrentProcesses: this test binary run again
// with CALLSCRIBE_TEST_MIGRATE_URL set migrates that database and exits.
func TestMain(m *testing.M) {
	if u := os.Getenv("CALLSCRIBE_TEST_MIGRATE_URL"); u != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pool, err := pgxpool.New(ctx, u)
		if err == nil {
			var steps []migrations.Step
			steps, err = migrations.New(pool, nil).Up(ctx)
			fmt.Printf("steps=%d\n", len(steps))
			pool.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func tables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.NewEmpty(t)
	m := migrations.New(pool, nil)

	steps, err := m.Up(ctx)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	var river, own int
	for _, s := range steps {
		if s.Line == "river" {
			river++
		} else {
			own++
		}
	}
	if river == 0 || own == 0 {
		t.Fatalf("Up applied river=%d callscribe=%d steps, want both > 0: %v", river, own, steps)
	}
	for _, want := range []string{"river_job", "recordings", "recording_events", "scope_deferrals"} {
		if !slices.Contains(tables(t, pool), want) {
			t.Fatalf("after Up, table %s missing: %v", want, tables(t, pool))
		}
	}

	again, err := m.Up(ctx)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Up = %v, %v; want no steps, no error", again, err)
	}

	status, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range status {
		if !s.Applied {
			t.Errorf("status after Up: %s %d %s not applied", s.Line, s.Version, s.Name)
		}
	}

	// One step down removes the newest callscribe migration only.
	down, err := m.Down(ctx, migrations.DownOpts{})
	if err != nil || len(down) != 1 || down[0].Line != "callscribe" {
		t.Fatalf("Down = %v, %v; want one callscribe step", down, err)
	}
	if slices.Contains(tables(t, pool), "recordings") && down[0].Version == 1 {
		t.Fatalf("recordings survived rolling back migration 1")
	}
	if !slices.Contains(tables(t, pool), "river_job") {
		t.Fatalf("one step down must leave River's tables")
	}

	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}

	all, err := m.Down(ctx, migrations.DownOpts{All: true})
	if err != nil {
		t.Fatalf("Down --all: %v", err)
	}
	if len(all) != own+river {
		t.Fatalf("Down --all rolled back %d steps, want %d", len(all), own+river)
	}
	for _, tbl := range tables(t, pool) {
		if tbl != migrations.VersionTable {
			t.Errorf("after Down --all, table %s remains", tbl)
		}
	}
	none, err := m.Down(ctx, migrations.DownOpts{All: true})
	if err != nil || len(none) != 0 {
		t.Fatalf("Down --all on an empty schema = %v, %v; want nothing", none, err)
	}
	if _, err := m.Down(ctx, migrations.DownOpts{}); err != nil {
		t.Fatalf("Down on an empty schema: %v", err)
	}

	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("Up after Down --all: %v", err)
	}
}

// Two goroutines with pools of their own and a second OS process migrate one
// empty database at once: every step is applied exactly once and all succeed.
func TestUpConcurrentProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.NewEmpty(t)
	url := testdb.URLOf(t, pool)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "CALLSCRIBE_TEST_MIGRATE_URL="+url)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	counts := make([]int, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			p, err := pgxpool.New(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer p.Close()
			steps, err := migrations.New(p, nil).Up(ctx)
			counts[i], errs[i] = len(steps), err
		})
	}
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second process: %v\n%s", err, out.String())
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
	}
	var procSteps int
	if _, err := fmt.Sscanf(strings.TrimSpace(out.String()), "steps=%d", &procSteps); err != nil {
		t.Fatalf("second process output %q: %v", out.String(), err)
	}
	total := counts[0] + counts[1] + procSteps
	status, err := migrations.New(pool, nil).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(status) {
		t.Fatalf("steps applied across 3 migrators = %d, want exactly %d (each once)", total, len(status))
	}
}

// Every migration belongs to exactly one owner's generated queries: the
// ledger's, the outbox's or serve/auth's (tokens) sqlc.yaml lists it as schema. A migration listed
// by neither would leave its tables out of the generated code; one listed
// by both would let one package's queries read the other's tables.
func TestEveryMigrationHasOneSQLCOwner(t *testing.T) {
	owners := map[string][]string{}
	for _, cfg := range []string{"../ledger/internal/dbsqlc/sqlc.yaml", "../outbox/internal/dbsqlc/sqlc.yaml", "../cmd/callscribe/internal/serve/auth/internal/dbsqlc/sqlc.yaml",
		"../capacity/orgcap/internal/dbsqlc/sqlc.yaml"} {
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`migrations/(\d+_\w+\.sql)`).FindAllStringSubmatch(string(b), -1) {
			owners[m[1]] = append(owners[m[1]], cfg)
		}
	}
	files, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no migrations found")
	}
	for _, f := range files {
		if got := owners[f]; len(got) != 1 {
			t.Errorf("migration %s is listed as sqlc schema by %d configurations %v, want exactly 1", f, len(got), got)
		}
		delete(owners, f)
	}
	for f, cfgs := range owners {
		t.Errorf("%v list migration %s, which does not exist", cfgs, f)
	}
}

// migrate down refuses to destroy rows unless told to, and names the
// tables that hold them.
func TestDownRefusesDataLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.NewEmpty(t)
	m := migrations.New(pool, nil)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO scope_deferrals (scope, not_before, updated_at) VALUES ('s', now(), now())`); err != nil {
		t.Fatal(err)
	}
	// The newest migration's rollback touches no table with rows.
	if _, err := m.Down(ctx, migrations.DownOpts{}); err != nil {
		t.Fatalf("down of a migration that destroys nothing: %v", err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := m.Down(ctx, migrations.DownOpts{All: true})
	var loss *migrations.DataLossError
	if !errors.As(err, &loss) || loss.Tables["scope_deferrals"] != 1 || !strings.Contains(err.Error(), "scope_deferrals (1 rows)") ||
		!strings.Contains(err.Error(), "--force-data-loss") {
		t.Fatalf("down --all over a table with rows: %v, want a DataLossError naming scope_deferrals", err)
	}
	if got := tables(t, pool); !slices.Contains(got, "scope_deferrals") || !slices.Contains(got, "river_job") {
		t.Fatalf("the refused rollback changed the schema: %v", got)
	}
	steps, err := m.Down(ctx, migrations.DownOpts{All: true, ForceDataLoss: true})
	if err != nil || len(steps) == 0 {
		t.Fatalf("forced down --all: %d steps, %v", len(steps), err)
	}
	if got := tables(t, pool); len(got) != 1 || got[0] != migrations.VersionTable {
		t.Fatalf("tables left after a forced rollback: %v, want only the version table", got)
	}
}

// A migrating user that may not create roles (managed PostgreSQL) still
// migrates; Up says the roles are not in place and why, and RolesSQL is
// what an administrator runs instead.
func TestUpWithoutRolePrivileges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.NewEmpty(t)
	const owner = "callscribe_test_plain_owner"
	if _, err := admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE `+owner+` LOGIN NOCREATEROLE NOSUPERUSER;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	db := admin.Config().ConnConfig.Database
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+" OWNER TO "+owner); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "ALTER SCHEMA public OWNER TO "+owner); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(testdb.URLOf(t, admin))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = owner, ""
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m := migrations.New(pool, nil)
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("Up as an owner that may not create roles: %v", err)
	}
	if r := m.Roles(); r.Granted || r.Why == "" {
		t.Fatalf("roles = %+v, want not granted, with the reason", r)
	}
	create, grants := migrations.RolesSQL()
	if !strings.Contains(create, "CREATE ROLE callscribe_runtime") || !strings.Contains(grants, "OWNER TO callscribe_purge") {
		t.Fatal("RolesSQL lacks the statements an administrator needs")
	}
}
