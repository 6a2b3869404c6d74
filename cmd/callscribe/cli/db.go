package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/devservice"
)

// PoolMaxConnsDefault is the connection pool size unless the database URL
// sets pool_max_conns.
const PoolMaxConnsDefault = 40

// connect opens a pool on url and checks that the server answers.
func connect(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database URL %s: %w", redactURL(dbURL), err)
	}
	// pgxpool's default (4 on a small machine) starves a worker running
	// dozens of River workers; pool_max_conns in the URL still wins.
	if !strings.Contains(dbURL, "pool_max_conns") {
		cfg.MaxConns = PoolMaxConnsDefault
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", redactURL(dbURL), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to %s: %w", redactURL(dbURL), err)
	}
	return pool, nil
}

// redactURL hides the password of a URL before it is printed or logged.
func redactURL(s string) string { return devservice.RedactURL(s) }

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
