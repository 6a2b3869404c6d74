package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// RetentionDefault is how long terminal histories are kept when
// Config.Retention is zero: 90 days.
const RetentionDefault = 90 * 24 * time.Hour

// PurgeBatchDefault is how many recordings one purge transaction removes
// when PurgeOpts.BatchSize is zero.
const PurgeBatchDefault = 500

// Config configures a Ledger. The zero value is usable.
type Config struct {
	// Clock stamps events and deferrals (stored in UTC, at microsecond
	// precision). Default (nil): clock.System.
	Clock clock.Clock
	// Logger receives warnings. Default: discard. Nothing personal (no
	// transcript text, no audio URLs) is ever logged.
	Logger *slog.Logger
	// Retention is how long a terminal recording's history is kept before
	// RetentionPurge may remove it. Default: RetentionDefault (90 days).
	// Must be positive.
	Retention time.Duration
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Retention == 0 {
		c.Retention = RetentionDefault
	}
	return c
}

func (c Config) validate() error {
	if c.Retention < 0 {
		return fmt.Errorf("ledger config: Retention (%s) must be positive", c.Retention)
	}
	return nil
}

// Ledger is the durable record of recordings, their events and the scope
// deferrals, in PostgreSQL. It is safe for concurrent use by any number of
// goroutines and processes.
type Ledger struct {
	pool    *pgxpool.Pool
	config  Config
	queries *dbsqlc.Queries
}

// New returns a Ledger over pool. The database must be migrated.
func New(pool *pgxpool.Pool, config *Config) (*Ledger, error) {
	c := Config{}
	if config != nil {
		c = *config
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Ledger{pool: pool, config: c, queries: dbsqlc.New()}, nil
}

func (l *Ledger) now() time.Time { return dbTime(l.config.Clock.Now()) }

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
