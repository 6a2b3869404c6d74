package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
)

// batches list and show print a manifest, its items with their keys and
// states and its history; jobs show names the manifests a recording was
// in, with the manifest's and the item's keys.
func TestBatchesListShowAndJobsShow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	config := northlineConfig(t, dir)
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	for _, call := range []string{"call-1001", "call-1003"} {
		if code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--tenant", "northline", "--call", call,
			"--audio", "northline/"+call+".wav", "--lane", "batch"); code != 0 {
			t.Fatalf("ingest: %d\n%s\n%s", code, out, stderr)
		}
	}
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m ledger.Manifest
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		recs, _, err := l.BatchCandidatesTx(ctx, tx, []string{"northline"}, 10)
		if err != nil {
			return err
		}
		m, err = l.FormManifestTx(ctx, tx, ledger.NewManifest{Key: "manifest:northline:generic-http:general:test", TenantID: "northline",
			Provider: "generic-http", Model: "general", Scope: "s", Recordings: recs, Reason: "full: 2 items"})
		return err
	})
	if err != nil || m.Items != 2 {
		t.Fatalf("forming: %+v %v", m, err)
	}

	code, out, stderr := run(t, ctx, env, "--config", config, "batches", "list", "--json")
	var listed []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0]["manifest_key"] != m.Key {
		t.Fatalf("batches list --json: %d %s %s", code, out, stderr)
	}
	code, out, stderr = run(t, ctx, env, "--config", config, "batches", "show", m.Key)
	if code != 0 || !strings.Contains(out, "state formed") || !strings.Contains(out, "northline:call-1003:") ||
		!strings.Contains(out, "pending") || !strings.Contains(out, "full: 2 items") {
		t.Fatalf("batches show: %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(t, ctx, env, "--config", config, "batches", "show", m.ID.String(), "--json")
	var shown struct {
		Manifest ledger.Manifest `json:"manifest"`
		Items    []struct {
			BusinessKey    string `json:"business_key"`
			RecordingState string `json:"recording_state"`
		} `json:"items"`
		Events []ledger.ManifestEvent `json:"events"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Items) != 2 || shown.Items[0].RecordingState != "eligible" ||
		len(shown.Events) != 1 || shown.Events[0].Kind != "formed" {
		t.Fatalf("batches show --json: %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = run(t, ctx, env, "--config", config, "batches", "show", "manifest:nope")
	if code == 0 {
		t.Fatalf("batches show of an unknown key: %d %s", code, out)
	}
	code, out, stderr = run(t, ctx, env, "--config", config, "jobs", "show", "--tenant", "northline", "--call", "call-1001")
	if code != 0 || !strings.Contains(out, "manifest "+m.Key+" (formed): item 1, key northline:call-1001:") {
		t.Fatalf("jobs show: %d\n%s\n%s", code, out, stderr)
	}
}
