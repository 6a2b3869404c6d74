// Package app opens what callscribe's commands run against, from the
// loaded configuration: the PostgreSQL pools (as the runtime role), the
// ledger, the pipeline, the outbox and the one River client running them,
// capacity in Redis, and the throwaway services of the demo. It is the
// composition root's toolbox; the commands themselves live in package cli.
package app

import (
	"errors"
	"io"
	"log/slog"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// Env is what a command may touch of its process.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// App is the state shared by the commands of one invocation: its
// environment, its configuration and logger, and what it opens from them
// (pools, the pipeline, capacity in Redis, the embedded services).
type App struct {
	Env        Env
	ConfigPath string
	Config     config.Config
	Logger     *slog.Logger
	// limitAlerts: see alerts.go; nil until leases are opened.
	limitAlerts *LimitAlerts
}

// ErrNoDatabase is returned by commands that need a lasting database.
var ErrNoDatabase = errors.New(config.EnvDatabaseURL + " is not set (nor database_url in --config): " +
	"this command needs a real, lasting PostgreSQL; the throwaway one exists only while `callscribe demo` runs")
