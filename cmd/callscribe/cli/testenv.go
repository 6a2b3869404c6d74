package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/internal/devservice"
)

func (a *app) testenvCommand() *cobra.Command {
	var install bool
	cmd := &cobra.Command{
		Use:   "testenv [--install] -- COMMAND [ARGS...]",
		Short: "Run COMMAND with TEST_DATABASE_URL and TEST_REDIS_URL pointing at running or throwaway services",
		Long: `testenv finds a PostgreSQL and a Redis for the test suite and runs COMMAND with
TEST_DATABASE_URL and TEST_REDIS_URL set. For each: reuse the server at
TEST_*_URL (default 127.0.0.1) if it answers; fail if the URL was set
explicitly and does not answer; else start a throwaway server from the
installed binaries; else, with --install, as root on Debian/Ubuntu, install
them with apt-get; else fail saying what to install. Throwaway servers are
stopped and removed when COMMAND ends.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg := devservice.TestEnvConfigFromEnv(a.env.Getenv)
			cfg.AllowInstall = install
			cfg.Logger = a.logger
			cfg.Out = a.env.Stderr
			env, err := devservice.ResolveTestEnv(ctx, cfg)
			if err != nil {
				return err
			}
			defer func() {
				stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := env.Stop(stopCtx); err != nil {
					a.logger.Error("stopping test services", "error", err)
				}
			}()
			fmt.Fprintf(a.env.Stderr, "testenv: PostgreSQL %s (%s), Redis %s (%s)\n",
				redactURL(env.DatabaseURL), env.DatabaseOrigin, redactURL(env.RedisURL), env.RedisOrigin)

			// Not CommandContext: on Ctrl-C the child gets the signal from the
			// terminal itself and is waited for, so services stop after it.
			child := exec.Command(args[0], args[1:]...) //nolint:gosec // running the given command is the point
			child.Stdin, child.Stdout, child.Stderr = os.Stdin, a.env.Stdout, a.env.Stderr
			child.Env = append(os.Environ(),
				devservice.TestDatabaseURLEnv+"="+env.DatabaseURL,
				devservice.TestRedisURLEnv+"="+env.RedisURL)
			err = child.Run()
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				return &exitError{code: exitErr.ExitCode()}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&install, "install", false, "as root on Debian/Ubuntu, apt-get install missing PostgreSQL/Redis server packages")
	return cmd
}
