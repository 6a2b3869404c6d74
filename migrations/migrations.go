package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.sql
var files embed.FS

// FS holds callscribe's numbered SQL migrations.
func FS() fs.FS { return files }

// LockKey is the PostgreSQL advisory lock held while migrating, so that two
// processes running `callscribe migrate` at once apply each step once.
const LockKey int64 = 0x63616c6c73637269 // "callscri"

// VersionTable is goose's bookkeeping table for callscribe's migrations.
const VersionTable = "callscribe_schema_version"

// Migrator applies River's migrations (through rivermigrate) and callscribe's
// own (through goose), under one advisory lock.
type Migrator struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	roles  RolesResult
}

// New returns a Migrator for the database behind pool. A nil logger discards.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Migrator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Migrator{pool: pool, logger: logger}
}

// Step is one migration applied or rolled back.
type Step struct {
	Line      string // "river" or "callscribe"
	Version   int64
	Name      string
	Direction string // "up" or "down"
}

func (s Step) String() string {
	return fmt.Sprintf("%-4s %-10s %05d %s", s.Direction, s.Line, s.Version, s.Name)
}

// Up applies every pending migration: River's first, then callscribe's. It is
// idempotent: with nothing pending it applies nothing and returns no steps.
func (m *Migrator) Up(ctx context.Context) ([]Step, error) {
	var steps []Step
	err := m.locked(ctx, func(p *goose.Provider, rm *rivermigrate.Migrator[pgx.Tx]) error {
		rres, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return fmt.Errorf("applying River migrations: %w", err)
		}
		for _, v := range rres.Versions {
			steps = append(steps, Step{Line: "river", Version: int64(v.Version), Name: v.Name, Direction: "up"})
		}
		res, err := p.Up(ctx)
		for _, r := range res {
			if r.Error == nil {
				steps = append(steps, gooseStep(r))
			}
		}
		if err != nil {
			return fmt.Errorf("applying callscribe migrations: %w", err)
		}
		// Every migration may add a table or function: the grants follow.
		roles, err := m.EnsureRoles(ctx)
		if err != nil {
			return err
		}
		m.roles = roles
		if !roles.Granted {
			m.logger.Warn("callscribe's roles are not in place: the runtime acts as the tables' owner, so the audit trail's guards cannot stop a stolen credential; see docs/operations.md",
				slog.String("why", roles.Why))
		}
		return nil
	})
	return steps, err
}

// Roles is what the last Up could do about the roles (see EnsureRoles).
func (m *Migrator) Roles() RolesResult { return m.roles }

// DownOpts says how far Down goes.
type DownOpts struct {
	// All rolls back every callscribe migration and then River's tables too,
	// leaving the database as it was before the first Up. The default (false)
	// rolls back the newest callscribe migration only.
	All bool
	// ForceDataLoss rolls back even when a table the rollback drops (or
	// drops a column of) holds rows. The default refuses, naming them.
	ForceDataLoss bool
}

// dropsData lists, per callscribe migration, the tables whose rows its
// rollback destroys: tables it drops and tables it drops columns of.
var dropsData = map[int64][]string{
	1:  {"recordings", "recording_events", "retention_purges", "scope_deferrals", "scope_deferral_extensions"},
	2:  {"transcripts", "recordings", "scope_deferral_extensions"},
	3:  {"action_sets", "outbox", "outbox_events", "counters"},
	4:  {"recordings"},
	5:  {"outbox"},
	6:  {"retention_audio", "retention_purges"},
	7:  {"api_tokens"},
	8:  {"rollout_cohorts", "rollout_events"},
	9:  {"outbox"},
	12: {"batch_manifests", "batch_manifest_items", "batch_manifest_events"},
	18: {"org_caps", "campaign_caps", "cap_changes"},
}

// riverDropsData: rolling River back drops its jobs.
var riverDropsData = []string{"river_job"}

// DataLossError is Down's refusal: the rollback would destroy rows.
type DataLossError struct {
	// Tables holding rows, each with its count.
	Tables map[string]int64
}

func (e *DataLossError) Error() string {
	names := make([]string, 0, len(e.Tables))
	for t := range e.Tables {
		names = append(names, t)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%d rows)", n, e.Tables[n])
	}
	return "the rollback would destroy the rows of " + strings.Join(parts, ", ") + ": refused (--force-data-loss to do it anyway)"
}

// checkDataLoss refuses (a *DataLossError) when rolling back the
// callscribe migrations newer than to (and River's, when river is set)
// would destroy rows.
func (m *Migrator) checkDataLoss(ctx context.Context, p *goose.Provider, to int64, river bool) error {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("reading the callscribe migration version: %w", err)
	}
	seen := map[string]bool{}
	var tables []string
	add := func(ts []string) {
		for _, t := range ts {
			if !seen[t] {
				seen[t] = true
				tables = append(tables, t)
			}
		}
	}
	for v := current; v > to; v-- {
		add(dropsData[v])
	}
	if river {
		add(riverDropsData)
	}
	lossy := map[string]int64{}
	for _, t := range tables {
		var n int64
		err := m.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t}.Sanitize()).Scan(&n)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: nothing to lose
				continue
			}
			return fmt.Errorf("counting the rows of %s: %w", t, err)
		}
		if n > 0 {
			lossy[t] = n
		}
	}
	if len(lossy) > 0 {
		return &DataLossError{Tables: lossy}
	}
	return nil
}

// Down rolls back migrations; see DownOpts. With nothing to roll back it does
// nothing and returns no steps.
func (m *Migrator) Down(ctx context.Context, opts DownOpts) ([]Step, error) {
	var steps []Step
	err := m.locked(ctx, func(p *goose.Provider, rm *rivermigrate.Migrator[pgx.Tx]) error {
		if !opts.ForceDataLoss {
			to := int64(0)
			if !opts.All {
				cur, err := p.GetDBVersion(ctx)
				if err != nil {
					return fmt.Errorf("reading the callscribe migration version: %w", err)
				}
				to = max(cur-1, 0)
			}
			if err := m.checkDataLoss(ctx, p, to, opts.All); err != nil {
				return err
			}
		}
		if !opts.All {
			r, err := p.Down(ctx)
			if errors.Is(err, goose.ErrNoNextVersion) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("rolling back the newest callscribe migration: %w", err)
			}
			steps = append(steps, gooseStep(r))
			return nil
		}
		res, err := p.DownTo(ctx, 0)
		for _, r := range res {
			if r.Error == nil {
				steps = append(steps, gooseStep(r))
			}
		}
		if err != nil {
			return fmt.Errorf("rolling back callscribe migrations: %w", err)
		}
		existing, err := rm.ExistingVersions(ctx)
		if err != nil {
			return fmt.Errorf("reading River migration versions: %w", err)
		}
		if len(existing) == 0 {
			return nil
		}
		rres, err := rm.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
		if err != nil {
			return fmt.Errorf("rolling back River migrations: %w", err)
		}
		for _, v := range rres.Versions {
			steps = append(steps, Step{Line: "river", Version: int64(v.Version), Name: v.Name, Direction: "down"})
		}
		return nil
	})
	return steps, err
}

// MigrationStatus is one known migration and whether it is applied.
type MigrationStatus struct {
	Line    string
	Version int64
	Name    string
	Applied bool
}

// Status lists River's and callscribe's migrations and which are applied.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	var out []MigrationStatus
	err := m.withTools(func(p *goose.Provider, rm *rivermigrate.Migrator[pgx.Tx]) error {
		existing, err := rm.ExistingVersions(ctx)
		if err != nil {
			return fmt.Errorf("reading River migration versions: %w", err)
		}
		applied := make(map[int]bool, len(existing))
		for _, v := range existing {
			applied[v.Version] = true
		}
		for _, v := range rm.AllVersions() {
			out = append(out, MigrationStatus{Line: "river", Version: int64(v.Version), Name: v.Name, Applied: applied[v.Version]})
		}
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("reading callscribe migration versions: %w", err)
		}
		for _, s := range st {
			out = append(out, MigrationStatus{
				Line: "callscribe", Version: s.Source.Version, Name: baseName(s.Source.Path),
				Applied: s.State == goose.StateApplied,
			})
		}
		return nil
	})
	return out, err
}

func (m *Migrator) withTools(fn func(*goose.Provider, *rivermigrate.Migrator[pgx.Tx]) error) error {
	db := stdlib.OpenDBFromPool(m.pool)
	defer func() { _ = db.Close() }()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(m.logger),
	)
	if err != nil {
		return fmt.Errorf("loading callscribe migrations: %w", err)
	}
	// River logs every step at info; Up and Down return the steps instead.
	rm, err := rivermigrate.New(riverpgxv5.New(m.pool), &rivermigrate.Config{Logger: slog.New(warnOnly{m.logger.Handler()})})
	if err != nil {
		return fmt.Errorf("loading River migrations: %w", err)
	}
	return fn(p, rm)
}

// locked runs fn while holding the migration advisory lock on a dedicated
// connection; a second process blocks until the first is done and then finds
// nothing left to do.
func (m *Migrator) locked(ctx context.Context, fn func(*goose.Provider, *rivermigrate.Migrator[pgx.Tx]) error) error {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring a connection for the migration lock: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", LockKey); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be given back even when ctx is done.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", LockKey); err != nil {
			m.logger.Warn("releasing the migration lock", slog.String("error", err.Error()))
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return m.withTools(fn)
}

func gooseStep(r *goose.MigrationResult) Step {
	return Step{Line: "callscribe", Version: r.Source.Version, Name: baseName(r.Source.Path), Direction: r.Direction}
}

func baseName(p string) string { return path.Base(p) }

// warnOnly passes on warnings and errors only.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

// Pending counts the migrations (River's and callscribe's) not yet
// applied; an error when the database cannot be read.
func (m *Migrator) Pending(ctx context.Context) (int, error) {
	st, err := m.Status(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range st {
		if !s.Applied {
			n++
		}
	}
	return n, nil
}
