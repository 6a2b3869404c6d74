// Package cli holds the commands of the callscribe binary and nothing
// else. main only wires the process (signals, exit code); everything here
// takes its output writers and environment as values, so commands are
// tested in-process. Each command binds its flags to an options struct
// checked by Validate before anything is opened; what the commands run
// against is opened by cmd/callscribe/internal/app, the composition root.
package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// Run executes the command line args and returns the process exit code.
// ctx is cancelled on Ctrl-C or SIGTERM.
func Run(ctx context.Context, args []string, env Env) int {
	a := &commands{App: &app.App{Env: env}}
	root := &cobra.Command{
		Use:           "callscribe",
		Short:         "Durable transcription pipeline: recordings in, validated transcripts and CRM follow-ups out, exactly once in effect",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config.LoadConfig(a.ConfigPath, env.Getenv)
			if err != nil {
				return err
			}
			a.Config = c
			a.Logger = config.NewLogger(env.Stderr, c.Log)
			c.LogWarnings(a.Logger)
			a.InstallRedisLog()
			return nil
		},
	}
	root.PersistentFlags().StringVar(&a.ConfigPath, "config", "", "YAML configuration file (see README: Configuration)")
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.AddCommand(a.migrateCommand(), a.ledgerCommand(), a.retentionCommand(), a.tokensCommand(), a.rolloutCommand(), a.demoCommand(),
		a.workerCommand(), a.ingestCommand(), a.jobsCommand(), a.scopesCommand(), a.simulateCommand(), a.outboxCommand(), a.replayCommand(), a.capacityCommand())
	root.AddCommand(a.serveCommand())
	root.AddCommand(a.callerIDsCommand())
	root.AddCommand(a.batchesCommand())
	root.AddCommand(a.orgsCommand(), a.campaignsCommand())

	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	fmt.Fprintln(env.Stderr, "callscribe:", err)
	return 1
}

// exitError carries the exit code of a child process through cobra.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Env is what a command may touch of its process.
type Env = app.Env

// commands are the commands of one invocation, over its App.
type commands struct{ *app.App }
