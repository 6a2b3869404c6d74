// Command testenv runs a command with TEST_DATABASE_URL and TEST_REDIS_URL
// pointing at a running or throwaway PostgreSQL and Redis: what `make test`
// runs the test suite under. It is a development tool, no part of the
// callscribe binary:
//
//	go run ./internal/cmd/testenv [--install] [--hogs N] -- COMMAND [ARGS...]
//
// For each service: reuse the server at TEST_*_URL (default 127.0.0.1) if
// it answers; fail if the URL was set explicitly and does not answer; else
// start a throwaway server from the installed binaries; else, with
// --install, as root on Debian/Ubuntu, install them with apt-get; else fail
// saying what to install. Throwaway servers are stopped and removed when
// COMMAND ends; testenv exits with COMMAND's exit code.
//
// It also looks for the Chromium the status page's browser test drives
// (as internal/headless does): if there is none, with --install, as root on
// Debian/Ubuntu, it runs apt-get install -y chromium (after apt-get update
// if that fails); otherwise it says what to install and goes on, and the
// browser test fails saying so.
//
// --hogs N runs COMMAND on a busy machine (`make test-load`): N CPU hogs,
// separate processes each spinning on one CPU (this program re-executed with
// CALLSCRIBE_CPU_HOG set), start before the services and COMMAND; N = 0 or
// "cores" means one per CPU (runtime.NumCPU()); without the flag there are
// none. They are SIGKILLed with their process groups when COMMAND ends or
// at once when testenv is interrupted (SIGINT, SIGTERM), and die with
// testenv should it be killed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/callscribe/callscribe/internal/devservice"
	"github.com/callscribe/callscribe/internal/headless"
)

func main() {
	devservice.RunHogIfAsked() // a CPU hog of --hogs spins here and never returns
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run runs testenv with the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("testenv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	install := fs.Bool("install", false, "as root on Debian/Ubuntu, apt-get install missing PostgreSQL/Redis server packages and Chromium")
	hogsFlag := fs.String("hogs", "", `run N CPU hogs (processes spinning on a CPU each) while COMMAND runs; 0 or "cores": one per CPU; default none`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: testenv [--install] [--hogs N] -- COMMAND [ARGS...]")
		fmt.Fprintln(stderr, "Runs COMMAND with TEST_DATABASE_URL and TEST_REDIS_URL pointing at running or throwaway services.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	hogs, err := devservice.ParseHogCount(*hogsFlag)
	if err != nil {
		fmt.Fprintln(stderr, "testenv:", err)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	stopHogs, err := startHogs(ctx, hogs, nil, stderr, logger)
	if err != nil {
		fmt.Fprintln(stderr, "testenv:", err)
		return 1
	}
	defer stopHogs()
	code, err := runWith(ctx, *install, fs.Args(), stdout, stderr, getenv, logger)
	if err != nil {
		fmt.Fprintln(stderr, "testenv:", err)
		return 1
	}
	return code
}

// runWith finds or starts the services, runs the command with their URLs
// and stops what it started.
func runWith(ctx context.Context, install bool, args []string, stdout, stderr io.Writer, getenv func(string) string, logger *slog.Logger) (int, error) {
	cfg := devservice.TestEnvConfigFromEnv(getenv)
	cfg.AllowInstall = install
	cfg.FindBrowser = headless.Path
	cfg.Logger = logger
	cfg.Out = stderr
	env, err := devservice.ResolveTestEnv(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := env.Stop(stopCtx); err != nil {
			logger.Error("stopping test services", "error", err)
		}
	}()
	browser := env.Browser
	if browser == "" {
		browser = "none (the browser test will fail)"
	}
	fmt.Fprintf(stderr, "testenv: PostgreSQL %s (%s), Redis %s (%s), Chromium %s\n",
		devservice.RedactURL(env.DatabaseURL), env.DatabaseOrigin, devservice.RedactURL(env.RedisURL), env.RedisOrigin, browser)

	// Not CommandContext: on Ctrl-C the child gets the signal from the
	// terminal itself and is waited for, so services stop after it.
	child := exec.Command(args[0], args[1:]...) //nolint:gosec // running the given command is the point
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, stdout, stderr
	child.Env = append(os.Environ(),
		devservice.TestDatabaseURLEnv+"="+env.DatabaseURL,
		devservice.TestRedisURLEnv+"="+env.RedisURL)
	err = child.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	return 0, err
}

// startHogs starts n CPU hogs (each running hogArgv; nil: this program) and
// says so on stderr; the returned func stops them, and so does ctx ending,
// at once. n == 0 starts nothing and prints nothing.
func startHogs(ctx context.Context, n int, hogArgv []string, stderr io.Writer, logger *slog.Logger) (stop func(), err error) {
	if n == 0 {
		return func() {}, nil
	}
	h, err := devservice.StartHogs(n, hogArgv, logger)
	if err != nil {
		return nil, err
	}
	stopNow := func() {
		if err := h.Stop(); err != nil {
			logger.Error("stopping CPU hogs", "error", err)
		}
	}
	unwatch := context.AfterFunc(ctx, stopNow)
	fmt.Fprintf(stderr, "testenv: %d CPU hogs running (busy processes; this machine has %d CPUs), killed when the command ends\n",
		h.Len(), runtime.NumCPU())
	return func() {
		unwatch()
		stopNow()
	}, nil
}
