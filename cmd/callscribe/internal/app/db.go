package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/devservice"
	"github.com/callscribe/callscribe/internal/pgrole"
	"github.com/callscribe/callscribe/internal/pgsession"
	"github.com/callscribe/callscribe/migrations"
	"github.com/callscribe/callscribe/outbox"
)

// PoolMaxConnsDefault is the connection pool size of a process that runs
// no workers, unless the database URL sets pool_max_conns.
const PoolMaxConnsDefault = 40

// ApplicationName is the application_name of the binary's sessions.
const ApplicationName = "callscribe"

// poolSpare is the connections a worker process keeps beyond one per
// worker: River's fetchers, leader election, notifier and maintenance,
// and serve's API requests.
const poolSpare = 10

// PoolSize is the pool a process running the configured workers needs:
// one connection per worker of each queue (immediate, batch, the CRM
// dispatcher's, replay's) plus poolSpare, and never below PoolMaxConnsDefault.
func (a *App) PoolSize() int32 {
	c := a.Config.PipelineConfig().WithDefaults()
	replay := cmp.Or(a.Config.Replay.Workers, outbox.ReplayWorkersDefault)
	return int32(max(c.ImmediateWorkers+c.BatchWorkers+outbox.WorkersDefault+replay+poolSpare, PoolMaxConnsDefault))
}

// Connect opens a pool on url for the runtime and checks that the server
// answers. Its connections act as the runtime role (SET ROLE
// callscribe_runtime) when the role exists and the user may take it; when
// not, it warns on log: the process then acts as the user it logged in as,
// usually the tables' owner.
func Connect(ctx context.Context, dbURL string, log *slog.Logger) (*pgxpool.Pool, error) {
	return connectAs(ctx, dbURL, migrations.RuntimeRole, log, PoolMaxConnsDefault)
}

// ConnectWorkers is connect with a pool sized for size connections (see
// poolSize), for a process that runs the pipeline's workers.
func ConnectWorkers(ctx context.Context, dbURL string, log *slog.Logger, size int32) (*pgxpool.Pool, error) {
	return connectAs(ctx, dbURL, migrations.RuntimeRole, log, size)
}

// ConnectOwner opens a pool that acts as the user it logs in as: for
// migrations, which need the tables' owner.
func ConnectOwner(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	return connectAs(ctx, dbURL, "", nil, PoolMaxConnsDefault)
}

// TokenCacheApplicationName is the application_name of the token cache's
// sessions (serve's), unless the database URL sets one.
const TokenCacheApplicationName = "callscribe token cache"

// ConnectTokenCache opens the token cache's own pool: size connections
// whatever the URL's pool_max_conns (which sizes the workers' pool), each
// dialled within connectTimeout, acting as the runtime role as Connect's
// do, so that looking a token up never waits behind the workers.
func ConnectTokenCache(ctx context.Context, dbURL string, log *slog.Logger, size int32, connectTimeout time.Duration) (*pgxpool.Pool, error) {
	return connect(ctx, dbURL, migrations.RuntimeRole, log, func(cfg *pgxpool.Config) {
		cfg.MaxConns = size
		cfg.ConnConfig.ConnectTimeout = connectTimeout
		if _, ok := cfg.ConnConfig.RuntimeParams[pgsession.ApplicationName]; !ok {
			cfg.ConnConfig.RuntimeParams[pgsession.ApplicationName] = TokenCacheApplicationName
		}
	})
}

func connectAs(ctx context.Context, dbURL, role string, log *slog.Logger, size int32) (*pgxpool.Pool, error) {
	return connect(ctx, dbURL, role, log, func(cfg *pgxpool.Config) {
		// pgxpool's default (4 on a small machine) starves a worker running
		// dozens of River workers; pool_max_conns in the URL still wins.
		if !strings.Contains(dbURL, "pool_max_conns") {
			cfg.MaxConns = size
		}
	})
}

// connect opens a pool on dbURL acting as role ("" the login user), sized
// and tuned by tune, and checks that the server answers.
func connect(ctx context.Context, dbURL, role string, log *slog.Logger, tune func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database URL %s: %w", RedactURL(dbURL), err)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	tune(cfg)
	// application_name and the server's bound on a session idle in a
	// transaction (the URL's own still win).
	pgsession.ApplyPool(cfg, ApplicationName)
	if role != "" {
		// Each connection takes the role as it opens, when the login user
		// may: no connection of its own to ask first.
		var warn sync.Once
		pgrole.ApplyIfUsable(cfg, role, func() {
			if log == nil {
				return
			}
			warn.Do(func() {
				log.Warn("acting as the login user, not the runtime role: the audit trail's guards cannot stop this credential from disabling them (run `callscribe migrate up` as a user that may create roles, or see docs/operations.md)",
					slog.String("role", role))
			})
		})
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", RedactURL(dbURL), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to %s: %w", RedactURL(dbURL), err)
	}
	return pool, nil
}

// RedactURL hides the password of a URL before it is printed or logged.
func RedactURL(s string) string { return devservice.RedactURL(s) }

func SHA256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
