package cli

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/ledger"
)

// manifestStates are the states --state of `batches list` takes.
var manifestStates = []ledger.ManifestState{ledger.ManifestFormed, ledger.ManifestSubmitted, ledger.ManifestAccepted,
	ledger.ManifestDone, ledger.ManifestUnbatched}

// batchesListOptions are the flags of `callscribe batches list`.
type batchesListOptions struct {
	state, tenant string
	limit         int
	json          bool
}

// Validate refuses an unknown --state and a negative --limit.
func (o batchesListOptions) Validate() error {
	if o.state != "" && !slices.Contains(manifestStates, ledger.ManifestState(o.state)) {
		return fmt.Errorf("--state %q: want formed, submitted, accepted, done or unbatched", o.state)
	}
	return wantLimit(o.limit)
}

// batchesShowOptions are the argument and flags of `callscribe batches show`.
type batchesShowOptions struct {
	manifest string // ID|KEY
	json     bool
}

// Validate refuses an empty ID|KEY.
func (o batchesShowOptions) Validate() error {
	if o.manifest == "" {
		return errors.New("ID|KEY: want a manifest's id or key")
	}
	return nil
}

// batchesCommand: the batch lane's manifests.
func (a *commands) batchesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "batches", Short: "The batch lane's manifests: their items and histories"}
	var lo batchesListOptions
	list := &cobra.Command{
		Use:   "list [--state S] [--tenant T] [--limit N] [--json]",
		Short: "Manifests, newest first: key, state, items, audio, the vendor's batch id, what it resubmits",
		Args:  cobra.NoArgs,
		RunE: a.withPipeline(&lo, func(cmd *cobra.Command, e *app.Pipeline) error {
			ms, err := e.Ledger.Manifests(cmd.Context(), ledger.ManifestFilter{State: ledger.ManifestState(lo.state), TenantID: lo.tenant, Limit: lo.limit})
			if err != nil {
				return err
			}
			if lo.json {
				if ms == nil {
					ms = []ledger.Manifest{}
				}
				return render.JSON(cmd.OutOrStdout(), ms)
			}
			return render.Manifests(cmd.OutOrStdout(), ms)
		}),
	}
	f := list.Flags()
	f.StringVar(&lo.state, "state", "", "only manifests in this state (formed, submitted, accepted, done, unbatched)")
	f.StringVar(&lo.tenant, "tenant", "", "only this tenant's manifests")
	f.IntVar(&lo.limit, "limit", 100, "at most this many")
	f.BoolVar(&lo.json, "json", false, "print the manifests as JSON")

	var so batchesShowOptions
	show := &cobra.Command{
		Use:   "show ID|KEY [--json]",
		Short: "A manifest: its items with their states (and their recordings' states), and its history",
		Args:  cobra.ExactArgs(1),
		RunE: a.withPipelineArgs(func(args []string) validator {
			so.manifest = args[0]
			return so
		}, func(cmd *cobra.Command, e *app.Pipeline) error {
			ctx := cmd.Context()
			id, perr := uuid.Parse(so.manifest)
			if perr != nil {
				m, err := e.Ledger.ManifestByKey(ctx, so.manifest)
				if err != nil {
					return err
				}
				id = m.ID
			}
			m, items, err := e.Ledger.Manifest(ctx, id)
			if err != nil {
				return err
			}
			evs, err := e.Ledger.ManifestEvents(ctx, id)
			if err != nil {
				return err
			}
			shown := make([]render.ManifestItem, len(items))
			for i, it := range items {
				shown[i].ManifestItem = it
				if r, err := e.Ledger.Recording(ctx, it.RecordingID); err == nil {
					shown[i].RecordingState = r.State
				}
			}
			if so.json {
				return render.JSON(cmd.OutOrStdout(), struct {
					Manifest ledger.Manifest        `json:"manifest"`
					Items    []render.ManifestItem  `json:"items"`
					Events   []ledger.ManifestEvent `json:"events"`
				}{m, shown, evs})
			}
			return render.Manifest(cmd.OutOrStdout(), m, shown, evs)
		}),
	}
	show.Flags().BoolVar(&so.json, "json", false, "print the manifest, its items and its events as JSON")
	cmd.AddCommand(list, show)
	return cmd
}
