//go:build callscribe_faults

package jobs_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/fault"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// The named crash points: a worker process kills itself (SIGKILL) at one of
// them; another process finishes the work. Whatever the point, the CRM holds
// each action set once, the ledger has one action version per recording,
// every recording's history is complete and legal, and the vendor
// transcribed each recording once. after_batch_accepted runs the batch
// lane's manifests: the vendor has accepted the manifest, its batch id is
// not recorded; the next worker sends the manifest again by its key and
// gets the same batch. The group_commit points kill the worker at its
// first and third group transaction, before its commit (nothing of the
// group is written) and after it (written, no step told).
//
//	go run ./internal/cmd/testenv -- go test -race -tags callscribe_faults -run TestCrashPoints ./jobs/
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"after_stt_accepted", "before_transcript_commit", "between_commit_and_delivery", "after_crm_applied",
		"after_batch_accepted",
		// Group commit: the first group (a submission recorded) and a
		// later one (a transcript, a try or a settlement), before their
		// commit and after it, before any step of the group is told.
		"group_commit_before_commit@1", "group_commit_after_commit@1", "group_commit_before_commit@3", "group_commit_after_commit@3"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			crashAt(t, point)
		})
	}
}

func crashAt(t *testing.T, point string) {
	ctx := context.Background()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, "recordings", "outbox", "batch_manifests") // the worker processes' writes
	root := t.TempDir()
	const n = 3
	var files []string
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("t1/call-%d.wav", i))
		jobstest.WriteWAV(t, p, 2*time.Second, 20+i)
		files = append(files, p)
	}
	sim, err := sttsim.New(sttsim.Config{Transcribe: func(sttsim.SubmitRequest) (sttsim.Result, error) {
		return sttsim.Result{Text: "I'll send you the rate sheet for Chicago to Dallas by Friday.", Language: "en", Confidence: 0.9, Duration: 2 * time.Second}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	crmSim, err := crmsim.New(crmsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	crmSrv := httptest.NewServer(crmSim.Handler())
	defer crmSrv.Close()

	l, _ := ledger.New(pool, nil)
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	manifests := point == "after_batch_accepted"
	cfg := jobs.Config{Tenants: map[string]jobs.TenantConfig{"t1": {Provider: "generic-http", BaseURL: stt.URL, APIKey: "sim-key", Model: "general"}},
		RolloutDefault: ledger.RolloutEnforce}
	var knobs []string
	if manifests {
		cfg.Batch = manifestKnobs
		knobs = append(knobs, workerManifestsEnv+"=1")
	}
	p, err := jobs.New(pool, l, cfg, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobstest.NewClient(pool, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if _, err := p.Ingest(ctx, client, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%d", i), Audio: f}); err != nil {
			t.Fatal(err)
		}
	}

	exe, _ := os.Executable()
	start := func(extra ...string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), workerEnv+"="+testdb.URLOf(t, pool), "CALLSCRIBE_TEST_AUDIO_ROOT="+root,
			"CALLSCRIBE_TEST_SIM_URL="+stt.URL, workerCRMURLEnv+"="+crmSrv.URL, workerBatchWorkersEnv+"=1")
		cmd.Env = append(cmd.Env, extra...)
		var errOut strings.Builder
		cmd.Stderr = &errOut
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = bufio.NewReader(stdout).ReadString(0) }()
		return cmd, &errOut
	}

	first, firstErr := start(append(knobs, fault.EnvCrashAt+"="+point)...)
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	select {
	case err := <-done:
		if !strings.Contains(fmt.Sprint(err), "killed") {
			t.Fatalf("the first worker did not die at %s: %v\n%s", point, err, firstErr.String())
		}
	case <-time.After(60 * time.Second):
		_ = first.Process.Kill()
		t.Fatalf("the first worker never reached %s\n%s", point, firstErr.String())
	}

	second, secondErr := start(append(knobs, "CALLSCRIBE_TEST_RESCUE_FAST=1")...)
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()
	ob, err := outbox.New(outbox.Config{}, pool, l)
	if err != nil {
		t.Fatal(err)
	}
	var counts map[ledger.State]int
	finished := func() bool {
		delivered, err := ob.Rows(ctx, outbox.StateDelivered, 100)
		if err != nil {
			t.Fatal(err)
		}
		counts, _ = l.CountByState(ctx)
		if manifests {
			// The manifest closes in its own transaction after its last
			// item settles: a busy machine can deliver every set first.
			if ms, err := l.Manifests(ctx, ledger.ManifestFilter{}); err != nil || len(ms) != 1 || ms[0].State != ledger.ManifestDone {
				return false
			}
		}
		return len(delivered) == n && counts[ledger.StateCommitted] == n
	}
	if !testwait.Until(90*time.Second, changes, finished) {
		all, _ := ob.Rows(ctx, "", 100)
		t.Fatalf("after the crash at %s: recordings %v, outbox %+v\n%s", point, counts, all, secondErr.String())
	}

	st := crmSim.Stats()
	if st.Applied != n {
		t.Fatalf("the CRM holds %d action sets, want %d", st.Applied, n)
	}
	for key, c := range st.ApplyCount {
		if c != 1 {
			t.Fatalf("%s applied %d times", key, c)
		}
	}
	var versions int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM action_sets").Scan(&versions); err != nil || versions != n {
		t.Fatalf("%d action sets in the ledger (%v), want one per recording (%d)", versions, err, n)
	}
	recs, _ := l.Recordings(ctx, ledger.RecordingFilter{})
	for _, r := range recs {
		evs, _ := l.Events(ctx, r.ID)
		if snap, err := ledger.Replay(evs); err != nil || snap != r.Snapshot() {
			t.Fatalf("%s: history does not replay: %v", r.CallID, err)
		}
		if n := sim.Transcriptions(r.BusinessKey); n != 1 {
			t.Fatalf("%s transcribed %d times", r.CallID, n)
		}
	}
	if manifests {
		ms, err := l.Manifests(ctx, ledger.ManifestFilter{})
		if err != nil || len(ms) != 1 || ms[0].State != ledger.ManifestDone || ms[0].Items != n {
			t.Fatalf("manifests %+v (%v), want one done with %d items", ms, err, n)
		}
		if st := sim.Stats(); st.Batches != 2 || st.Replays != 1 {
			t.Fatalf("the vendor saw %d batch requests and %d replays, want 2 and 1: the manifest sent again by its key", st.Batches, st.Replays)
		}
	}
}
