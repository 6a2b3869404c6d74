package cli

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
)

// capSetOptions are the arguments and flags of `callscribe orgs set` and
// `campaigns set`.
type capSetOptions struct {
	org, campaign string
	limit         int
	reason        string
}

// Validate names the argument or flag that orgcap would refuse.
func (o capSetOptions) Validate() error {
	if err := capacity.CheckID("ORG", o.org); err != nil {
		return err
	}
	top := capacity.OrgLimitMax
	if o.campaign != "" {
		if err := capacity.CheckID("CAMPAIGN", o.campaign); err != nil {
			return err
		}
		top = capacity.CampaignLimitMax
	}
	if o.limit < 1 || o.limit > top {
		return fmt.Errorf("--limit %d: want 1–%d", o.limit, top)
	}
	if len(o.reason) > orgcap.ReasonMaxLen {
		return fmt.Errorf("--reason: %d bytes, at most %d", len(o.reason), orgcap.ReasonMaxLen)
	}
	return nil
}

// capListOptions are the flags of `callscribe orgs list` and `campaigns
// list`.
type capListOptions struct {
	org     string
	history bool
	limit   int
	json    bool
}

// Validate names the flag that orgcap would refuse.
func (o capListOptions) Validate() error {
	if o.org != "" {
		if err := capacity.CheckID("--org", o.org); err != nil {
			return err
		}
	}
	if o.limit < 0 || o.limit > orgcap.HistoryMaxRows {
		return fmt.Errorf("--limit %d: want 0–%d (0: 100)", o.limit, orgcap.HistoryMaxRows)
	}
	return nil
}

// withCaps is the RunE of a command on the stored caps: it checks the
// options bound to the arguments, connects as the runtime role, and runs
// run on the store.
func (a *commands) withCaps(bind func(args []string) validator, run func(cmd *cobra.Command, s *orgcap.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := bind(args).Validate(); err != nil {
			return err
		}
		if a.Config.DatabaseURL == "" {
			return app.ErrNoDatabase
		}
		pool, err := app.Connect(cmd.Context(), a.Config.DatabaseURL, a.Logger)
		if err != nil {
			return err
		}
		defer pool.Close()
		return run(cmd, orgcap.New(pool))
	}
}

// capSet is the RunE of `orgs set` and `campaigns set`.
func (a *commands) capSet(o *capSetOptions, bind func(args []string)) func(*cobra.Command, []string) error {
	return a.withCaps(func(args []string) validator { bind(args); return o }, func(cmd *cobra.Command, s *orgcap.Store) error {
		ch, err := s.Set(cmd.Context(), orgcap.Update{Org: o.org, Campaign: o.campaign, Limit: o.limit, Reason: o.reason, By: startedBy()})
		if err != nil {
			return err
		}
		what, from := "organisation "+ch.Org, "none stored"
		if ch.Campaign != "" {
			what = "campaign " + ch.Org + "/" + ch.Campaign
		}
		if ch.PriorLimit != nil {
			from = strconv.Itoa(*ch.PriorLimit)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: cap %d (was %s), change %d at %s; serve processes apply it within %s\n",
			what, ch.Limit, from, ch.ID, ch.At.Format(time.RFC3339), a.capsRefresh())
		return nil
	})
}

// capsRefresh is how often the serve processes of this configuration
// re-read the stored caps.
func (a *commands) capsRefresh() time.Duration {
	return cmp.Or(a.Config.Capacity.CapsRefresh, orgcap.EveryDefault)
}

// configuredOrgs is capacity.orgs as rows of `orgs list` and `campaigns
// list`: the organisations (or campaigns) the file names and the store
// does not.
func (a *commands) configuredOrgs(stored []orgcap.Cap, campaigns bool, org string) []render.OrgCapRow {
	have := map[[2]string]bool{}
	for _, c := range stored {
		have[[2]string{c.Org, c.Campaign}] = true
	}
	var out []render.OrgCapRow
	orgs := a.Config.Capacity.Orgs
	for _, name := range slices.Sorted(maps.Keys(orgs)) {
		if org != "" && name != org {
			continue
		}
		o := orgs[name]
		if !campaigns {
			if !have[[2]string{name, ""}] {
				limit := cmp.Or(o.Limit, a.Config.Capacity.OrgLimit, capacity.OrgLimitDefault)
				out = append(out, render.OrgCapRow{Cap: orgcap.Cap{Org: name, Limit: limit}, Source: "config"})
			}
			continue
		}
		for _, camp := range slices.Sorted(maps.Keys(o.Campaigns)) {
			if !have[[2]string{name, camp}] {
				out = append(out, render.OrgCapRow{Cap: orgcap.Cap{Org: name, Campaign: camp, Limit: o.Campaigns[camp]}, Source: "config"})
			}
		}
	}
	return out
}

// capRows merges stored and configured rows, by organisation and campaign.
func capRows(stored []orgcap.Cap, configured []render.OrgCapRow) []render.OrgCapRow {
	rows := make([]render.OrgCapRow, 0, len(stored)+len(configured))
	for _, c := range stored {
		rows = append(rows, render.OrgCapRow{Cap: c, Source: "stored"})
	}
	rows = append(rows, configured...)
	slices.SortFunc(rows, func(x, y render.OrgCapRow) int {
		return cmp.Or(cmp.Compare(x.Org, y.Org), cmp.Compare(x.Campaign, y.Campaign))
	})
	return rows
}

func (a *commands) orgsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orgs",
		Short: "Organisations' call caps stored at run time (over capacity.orgs), applied by every serve process without a restart",
	}
	var so capSetOptions
	set := &cobra.Command{
		Use:   "set ORG --limit N [--reason R]",
		Short: "Set an organisation's concurrent-call cap (1–10000, not below a stored campaign cap of it); recorded with who, when and why",
		Args:  cobra.ExactArgs(1),
		RunE:  a.capSet(&so, func(args []string) { so.org = args[0] }),
	}
	set.Flags().IntVar(&so.limit, "limit", 0, "the cap: concurrent calls of the organisation (required)")
	set.Flags().StringVar(&so.reason, "reason", "", "why, recorded with the change")
	var lo capListOptions
	list := &cobra.Command{
		Use:   "list [--history [--org ORG] [--limit N]] [--json]",
		Short: "Organisations' caps, stored and configured; --history: the changes, newest first",
		Args:  cobra.NoArgs,
		RunE: a.withCaps(func([]string) validator { return lo }, func(cmd *cobra.Command, s *orgcap.Store) error {
			stored, err := s.Orgs(cmd.Context())
			if err != nil {
				return err
			}
			rows := capRows(stored, a.configuredOrgs(stored, false, ""))
			var changes []orgcap.Change
			if lo.history {
				if changes, err = s.History(cmd.Context(), lo.org, lo.limit); err != nil {
					return err
				}
				if changes == nil {
					changes = []orgcap.Change{}
				}
			}
			deflt := cmp.Or(a.Config.Capacity.OrgLimit, capacity.OrgLimitDefault)
			if lo.json {
				out := map[string]any{"orgs": rows, "default_limit": deflt}
				if lo.history {
					out["changes"] = changes
				}
				return render.JSON(cmd.OutOrStdout(), out)
			}
			if err := render.OrgCaps(cmd.OutOrStdout(), rows, false); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "an organisation not listed: %d concurrent calls (capacity.org_limit)\n", deflt)
			if !lo.history {
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return render.CapChanges(cmd.OutOrStdout(), changes)
		}),
	}
	list.Flags().BoolVar(&lo.history, "history", false, "also print the changes (the audit trail), newest first")
	list.Flags().StringVar(&lo.org, "org", "", "with --history: one organisation's changes (its campaigns' too)")
	list.Flags().IntVar(&lo.limit, "limit", 0, "with --history: at most this many changes (0: 100)")
	list.Flags().BoolVar(&lo.json, "json", false, "print JSON")
	cmd.AddCommand(set, list)
	return cmd
}

func (a *commands) campaignsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "campaigns",
		Short: "Campaigns' call caps stored at run time (over capacity.orgs), applied by every serve process without a restart",
	}
	var so capSetOptions
	set := &cobra.Command{
		Use:   "set ORG CAMPAIGN --limit N [--reason R]",
		Short: "Set a campaign's concurrent-call cap (1–20, at most its organisation's stored cap, which it needs first)",
		Args:  cobra.ExactArgs(2),
		RunE:  a.capSet(&so, func(args []string) { so.org, so.campaign = args[0], args[1] }),
	}
	set.Flags().IntVar(&so.limit, "limit", 0, "the cap: concurrent calls of the campaign (required)")
	set.Flags().StringVar(&so.reason, "reason", "", "why, recorded with the change")
	var lo capListOptions
	list := &cobra.Command{
		Use:   "list [--org ORG] [--json]",
		Short: "Campaigns' caps, stored and configured",
		Args:  cobra.NoArgs,
		RunE: a.withCaps(func([]string) validator { return lo }, func(cmd *cobra.Command, s *orgcap.Store) error {
			stored, err := s.Campaigns(cmd.Context(), lo.org)
			if err != nil {
				return err
			}
			rows := capRows(stored, a.configuredOrgs(stored, true, lo.org))
			if lo.json {
				return render.JSON(cmd.OutOrStdout(), map[string]any{"campaigns": rows})
			}
			return render.OrgCaps(cmd.OutOrStdout(), rows, true)
		}),
	}
	list.Flags().StringVar(&lo.org, "org", "", "one organisation's campaigns")
	list.Flags().BoolVar(&lo.json, "json", false, "print JSON")
	cmd.AddCommand(set, list)
	return cmd
}
