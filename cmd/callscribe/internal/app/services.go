package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/internal/devservice"
)

// Services are the PostgreSQL and Redis a command runs against: the
// configured ones, or throwaway ones when none is configured.
type Services struct {
	Pool        *pgxpool.Pool
	Redis       *redis.Client
	DatabaseURL string
	RedisURL    string
	// DatabaseHint and RedisHint tell a person how to connect.
	DatabaseHint string
	RedisHint    string
	// Throwaway lists what was started and will be removed on Close.
	Throwaway []string

	postgres *devservice.Postgres
	miniRed  *devservice.Redis
}

// OpenServices connects to the configured services, starting a throwaway
// PostgreSQL cluster and an in-process Redis for what is not configured.
func (a *App) OpenServices(ctx context.Context) (*Services, error) {
	s := &Services{DatabaseURL: a.Config.DatabaseURL, RedisURL: a.Config.RedisURL}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close(context.WithoutCancel(ctx))
		}
	}()
	if s.DatabaseURL == "" {
		a.Logger.Info("no database URL configured: starting a throwaway PostgreSQL cluster")
		pg, err := devservice.StartPostgres(ctx, devservice.PostgresConfig{
			BinDir:    a.Config.EmbeddedPostgres.BinDir,
			RunAsUser: a.Config.EmbeddedPostgres.RunAsUser,
			Logger:    a.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("starting a throwaway PostgreSQL (set %s to use a running server): %w", config.EnvDatabaseURL, err)
		}
		s.postgres = pg
		s.DatabaseURL, s.DatabaseHint = pg.URL(), pg.ConnectHint()
		s.Throwaway = append(s.Throwaway, "PostgreSQL cluster in "+pg.Dir())
	} else {
		s.DatabaseHint = fmt.Sprintf("psql %q", RedactURL(s.DatabaseURL))
	}
	if s.RedisURL == "" {
		a.Logger.Info("no Redis URL configured: starting an in-process Redis (miniredis)")
		mr, err := devservice.StartMiniredis()
		if err != nil {
			return nil, fmt.Errorf("starting an in-process Redis: %w", err)
		}
		s.miniRed = mr
		s.RedisURL, s.RedisHint = mr.URL(), mr.ConnectHint()
		s.Throwaway = append(s.Throwaway, "in-process Redis at "+mr.URL())
	} else {
		s.RedisHint = "redis-cli -u " + RedactURL(s.RedisURL)
	}

	pool, err := ConnectOwner(ctx, s.DatabaseURL)
	if err != nil {
		return nil, err
	}
	s.Pool = pool
	opts, err := redis.ParseURL(s.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the Redis URL %s: %w", RedactURL(s.RedisURL), err)
	}
	s.Redis = redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Redis.Ping(pingCtx).Err(); err != nil {
		return nil, fmt.Errorf("connecting to Redis at %s: %w", RedactURL(s.RedisURL), err)
	}
	ok = true
	return s, nil
}

// Close disconnects and stops whatever openServices started. Idempotent.
func (s *Services) Close(ctx context.Context) error {
	var errs []error
	if s.Pool != nil {
		s.Pool.Close()
		s.Pool = nil
	}
	if s.Redis != nil {
		errs = append(errs, s.Redis.Close())
		s.Redis = nil
	}
	if s.miniRed != nil {
		errs = append(errs, s.miniRed.Stop())
	}
	if s.postgres != nil {
		errs = append(errs, s.postgres.Stop(ctx))
	}
	return errors.Join(errs...)
}
