package ledger

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/fielderr"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// RetentionDefault is how long terminal histories are kept when
// Config.Retention is zero: 90 days. It is the one retention default: the
// pipeline's (jobs.Config.Retention) is this one too.
const RetentionDefault = 90 * 24 * time.Hour

// PurgeBatchDefault is how many recordings one purge transaction removes
// when PurgeOpts.BatchSize is zero.
const PurgeBatchDefault = 500

// Config configures a Ledger. The zero value is usable. The yaml keys are
// those of callscribe's configuration file (its ledger section).
type Config struct {
	// Clock stamps events and deferrals (stored in UTC, at microsecond
	// precision) and is the "now" admissions compare deadlines to.
	// Default (nil): the database's clock (see Ledger.Clock): admissions
	// compare to the database's own reading, and stamps are LocalClock
	// corrected by its measured offset to the database's. A stub here
	// (tests) is used as it is for both.
	Clock clock.Clock `yaml:"-"`
	// LocalClock is this process's clock, which the default Clock corrects
	// to the database's; ignored when Clock is set. Default (nil):
	// clock.System.
	LocalClock clock.Clock `yaml:"-"`
	// Logger receives warnings. Default: discard. Nothing personal (no
	// transcript text, no audio URLs) is ever logged.
	Logger *slog.Logger `yaml:"-"`
	// Retention is how long a terminal recording's history is kept before
	// RetentionPurge may remove it. Default: RetentionDefault (90 days).
	// Must be positive.
	Retention time.Duration `yaml:"retention"`
	// Commit configures group commit (Ledger.Commit): many workers'
	// steps written in one transaction. Default: on, CommitConfig's
	// defaults.
	Commit CommitConfig `yaml:"group_commit"`
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.LocalClock = cmp.Or[clock.Clock](c.LocalClock, clock.System{})
	if c.Clock == nil {
		c.Clock = &databaseClock{local: c.LocalClock}
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.Commit = c.Commit.WithDefaults()
	return c
}

// Validate reports every problem with c, each a *fielderr.Error naming
// the field.
func (c Config) Validate() error {
	if c.Retention < 0 {
		return fielderr.Errorf("Retention", "%s must be positive", c.Retention)
	}
	return fielderr.In(c.Commit.Validate(), "Commit")
}

// Ledger is the durable record of recordings, their events and the scope
// deferrals, in PostgreSQL. It is safe for concurrent use by any number of
// goroutines and processes.
type Ledger struct {
	pool    *pgxpool.Pool
	config  Config
	queries *dbsqlc.Queries
	// dbClock is config.Clock when it is the database's (the default);
	// nil when a clock was given.
	dbClock *databaseClock
	// commit gathers steps into group transactions (Commit).
	commit *Committer
}

// New returns a Ledger over pool. The database must be migrated.
func New(pool *pgxpool.Pool, config *Config) (*Ledger, error) {
	c := Config{}
	if config != nil {
		c = *config
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("ledger config: %w", err)
	}
	l := &Ledger{pool: pool, config: c, queries: dbsqlc.New()}
	l.dbClock, _ = c.Clock.(*databaseClock)
	// c.Commit was validated with the rest.
	l.commit, _ = NewCommitter(pool, c.Commit)
	return l, nil
}

func (l *Ledger) now() time.Time { return pgtime.Write(l.config.Clock.Now()) }

// Clock is the ledger's clock: by default the database's as this process
// estimates it (the local clock corrected by the offset measured at
// admission reads), else the Clock it was given. Callers that compute
// deadlines, measure waits to them or stamp the sending of a request use
// it, so that every process of a platform works on one clock.
func (l *Ledger) Clock() clock.Clock { return l.config.Clock }

// SyncClock measures the offset of the local clock to the database's once
// (admission reads keep measuring it). It does nothing for a ledger given
// its own Clock.
func (l *Ledger) SyncClock(ctx context.Context) error {
	if l.dbClock == nil {
		return nil
	}
	before := l.dbClock.local.Now()
	db, err := l.queries.DatabaseNow(ctx, l.pool)
	if err != nil {
		return fmt.Errorf("reading the database's clock: %w", translate(err))
	}
	l.dbClock.sample(before, l.dbClock.local.Now(), db)
	return nil
}

// ClockOffset is the measured offset of the database's clock to this
// process's (zero for a ledger given its own Clock).
func (l *Ledger) ClockOffset() time.Duration {
	if l.dbClock == nil {
		return 0
	}
	return l.dbClock.Offset()
}

// inTx runs fn in a transaction of its own: short, committed on success,
// rolled back on error.
func (l *Ledger) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return translate(tx.Commit(ctx))
}

// deref is *p, or the zero value for NULL.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nonZero is &v, or NULL for the zero value.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
