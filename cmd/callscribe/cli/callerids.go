package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
)

// callerIDsOptions are the flags of `callscribe caller-ids add`, `remove`
// and `list`.
type callerIDsOptions struct {
	org         string
	json, force bool
}

// Validate refuses a missing --org.
func (o callerIDsOptions) Validate() error {
	if o.org == "" {
		return errors.New("--org: required, the organisation whose pool it is")
	}
	return nil
}

func (a *commands) callerIDsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "caller-ids",
		Short: "Each organisation's pool of outbound caller IDs (the numbers its calls dial from)",
		Long: fmt.Sprintf(`An organisation's calls take numbers from its pool through the capacity API
(POST /v1/caller-ids:acquire and :release): one call per number at a time; a
number not given back returns to the pool %d minutes after it was taken.
Numbers are E.164: '+' then %d–%d digits.`, int(capacity.StaleAfterDefault.Minutes()), capacity.CallerIDDigitsMin, capacity.CallerIDDigitsMax),
	}
	var o callerIDsOptions
	add := &cobra.Command{
		Use:   "add --org ORG NUMBER...",
		Short: "Add numbers to the organisation's pool, free (numbers already there are left as they are)",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.run(a, func(cmd *cobra.Command, args []string, c *capacity.CallerIDs) error {
			n, err := c.Add(cmd.Context(), o.org, args...)
			if err != nil {
				return err
			}
			if o.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"org": o.org, "added": n, "already_there": len(args) - n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "org %s: %d added, %d already there\n", o.org, n, len(args)-n)
			return nil
		}),
	}
	remove := &cobra.Command{
		Use:   "remove --org ORG [--force] NUMBER...",
		Short: "Remove numbers from the organisation's pool; a number a call holds is refused (nothing removed) unless --force",
		Args:  cobra.MinimumNArgs(1),
		RunE: o.run(a, func(cmd *cobra.Command, args []string, c *capacity.CallerIDs) error {
			n, err := c.Remove(cmd.Context(), o.org, o.force, args...)
			if err != nil {
				return err
			}
			if o.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"org": o.org, "removed": n, "not_there": len(args) - n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "org %s: %d removed, %d not in the pool\n", o.org, n, len(args)-n)
			return nil
		}),
	}
	remove.Flags().BoolVar(&o.force, "force", false, "remove numbers even while calls hold them (their releases then free nothing)")
	list := &cobra.Command{
		Use:   "list --org ORG [--json]",
		Short: "The organisation's numbers: free, busy or stale, busy since, and the holding call",
		Args:  cobra.NoArgs,
		RunE: o.run(a, func(cmd *cobra.Command, args []string, c *capacity.CallerIDs) error {
			l, err := c.List(cmd.Context(), o.org)
			if err != nil {
				return err
			}
			if o.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"org": o.org, "numbers": l})
			}
			return render.CallerIDs(cmd.OutOrStdout(), l)
		}),
	}
	for _, c := range []*cobra.Command{add, remove, list} {
		c.Flags().StringVar(&o.org, "org", "", "the organisation (required)")
		c.Flags().BoolVar(&o.json, "json", false, "print JSON")
	}
	cmd.AddCommand(add, remove, list)
	return cmd
}

// run is the RunE of a caller-ids command: it checks o, opens the pools,
// runs do on them and closes them.
func (o *callerIDsOptions) run(a *commands, do func(cmd *cobra.Command, args []string, c *capacity.CallerIDs) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Validate(); err != nil {
			return err
		}
		c, closeFn, err := a.OpenCallerIDs()
		if err != nil {
			return err
		}
		defer closeFn()
		return do(cmd, args, c)
	}
}
