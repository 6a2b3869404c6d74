package devservice_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/internal/devservice"
)

// A throwaway PostgreSQL for one run: started, used, stopped and deleted.
func ExampleStartPostgres() {
	ctx := context.Background()
	pg, err := devservice.StartPostgres(ctx, devservice.PostgresConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := pg.Stop(ctx); err != nil {
			log.Print(err)
		}
	}()

	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n)
	// Output: 42
}

// An in-process Redis, when no redis-server is installed.
func ExampleStartMiniredis() {
	r, err := devservice.StartMiniredis()
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := r.Stop(); err != nil {
			log.Print(err)
		}
	}()

	opts, err := redis.ParseURL(r.URL())
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	fmt.Println(client.Ping(context.Background()).Val())
	// Output: PONG
}

// What `make test` does before running the suite: reuse or start servers,
// hand their URLs to the tests, stop what it started.
func ExampleResolveTestEnv() {
	ctx := context.Background()
	cfg := devservice.TestEnvConfigFromEnv(os.Getenv)
	cfg.Out = os.Stderr
	env, err := devservice.ResolveTestEnv(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := env.Stop(ctx); err != nil {
			log.Print(err)
		}
	}()

	os.Setenv(devservice.TestDatabaseURLEnv, env.DatabaseURL)
	os.Setenv(devservice.TestRedisURLEnv, env.RedisURL)
	// ... run `go test ./...` with this environment.
}
