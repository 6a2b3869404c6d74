package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
)

// The checks the options of several commands share; each names its flag.

// wantLimit refuses a negative --limit (0 asks for the default).
func wantLimit(n int) error {
	if n < 0 {
		return fmt.Errorf("--limit %d: want a count (0: the default)", n)
	}
	return nil
}

// wantSince refuses a --since that does not reach back.
func wantSince(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--since %s: want a positive duration", d)
	}
	return nil
}

// validator is a command's options: Validate names the bad flag or
// argument, and runs before anything is opened.
type validator interface{ Validate() error }

// withPipeline is the RunE of a command that works through the pipeline
// (ledger, outbox, jobs) and nothing of capacity: it checks o (nil: no
// options), opens the pipeline, runs run on it and closes it. o is checked
// when the command runs: pass a pointer to the options its flags bind to.
func (a *commands) withPipeline(o validator, run func(cmd *cobra.Command, e *app.Pipeline) error) func(*cobra.Command, []string) error {
	return a.withPipelineArgs(func([]string) validator { return o }, run)
}

// withPipelineArgs is withPipeline for a command with arguments: bind puts
// them into the command's options and returns those to check.
func (a *commands) withPipelineArgs(bind func(args []string) validator, run func(cmd *cobra.Command, e *app.Pipeline) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if o := bind(args); o != nil {
			if err := o.Validate(); err != nil {
				return err
			}
		}
		e, err := a.OpenPipeline(cmd.Context(), app.Caps{})
		if err != nil {
			return err
		}
		defer e.Close()
		return run(cmd, e)
	}
}
