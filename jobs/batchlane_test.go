package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// batchLane is a pipeline configuration whose batch lane sends manifests
// of up to maxItems, formed quickly.
func batchLane(maxItems int) jobs.Config {
	return jobs.Config{Batch: jobs.BatchConfig{Manifests: true, MaxItems: maxItems, MaxWait: 100 * time.Millisecond,
		FormEvery: 50 * time.Millisecond, PollInterval: 100 * time.Millisecond}}
}

// The vendor completes about 70% of a manifest, fails 20% (worth sending
// again) and loses 10%: every resubmission carries exactly the items of
// its predecessor still uncommitted, nothing else; every recording ends
// committed, each action set applied once by the CRM; the recordings'
// events name their manifests; and the vendor saw far fewer requests than
// recordings.
func TestBatchLanePartialCompletionResubmitsOnlyTheUnfinished(t *testing.T) {
	t.Parallel()
	const n = 50
	e := runToDeliveredWith(t, n, sttsim.Config{BatchItemFailShare: 0.2, BatchItemLoseShare: 0.1, Rand: rand.New(rand.NewPCG(7, 8))},
		batchLane(n), crmsim.Config{})
	ctx := context.Background()
	counts, err := e.ledger.CountByState(ctx)
	if err != nil || counts[ledger.StateCommitted] != n {
		t.Fatalf("recordings %v (%v), want %d committed", counts, err, n)
	}
	if st := e.crm.Stats(); st.Applied != n {
		t.Fatalf("the CRM applied %d action sets, want %d", st.Applied, n)
	}
	ms, err := e.ledger.Manifests(ctx, ledger.ManifestFilter{})
	if err != nil {
		t.Fatal(err)
	}
	items := map[uuid.UUID][]ledger.ManifestItem{}
	var first *ledger.Manifest
	resubmitted := 0
	for i, m := range ms {
		if m.State != ledger.ManifestDone {
			t.Fatalf("manifest %s is %s, want done", m.Key, m.State)
		}
		if _, items[m.ID], err = e.ledger.Manifest(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		if m.ResubmissionOf == nil {
			if first != nil {
				t.Fatalf("two first manifests: %s and %s", first.Key, m.Key)
			}
			first = &ms[i]
		}
	}
	if first == nil || first.Items != n {
		t.Fatalf("the first manifest: %+v, want one of %d items", first, n)
	}
	for _, m := range ms {
		if m.ResubmissionOf == nil {
			continue
		}
		var want, got []uuid.UUID
		for _, it := range items[*m.ResubmissionOf] {
			if it.State == ledger.ItemResubmit {
				want = append(want, it.RecordingID)
			}
		}
		for _, it := range items[m.ID] {
			got = append(got, it.RecordingID)
		}
		slices.SortFunc(want, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		slices.SortFunc(got, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		if !slices.Equal(want, got) {
			t.Fatalf("manifest %s resubmits %d items, want exactly the %d its predecessor sent back", m.Key, len(got), len(want))
		}
		resubmitted += len(got)
	}
	st := e.stt.Stats()
	if st.BatchItemsFailed == 0 || st.BatchItemsLost == 0 || resubmitted != st.BatchItemsFailed+st.BatchItemsLost {
		t.Fatalf("%d items resubmitted; the vendor failed %d and lost %d", resubmitted, st.BatchItemsFailed, st.BatchItemsLost)
	}
	if st.Accepted != n+resubmitted {
		t.Fatalf("the vendor transcribed %d items, want %d: each recording once, and the failed or lost ones again", st.Accepted, n+resubmitted)
	}
	requests := st.Submissions + st.Polls
	t.Logf("%d manifests, %d items resubmitted, %d vendor requests for %d transcripts (%.2f per transcript)",
		len(ms), resubmitted, requests, n, float64(requests)/n)
	if requests*3 > n {
		t.Fatalf("%d vendor requests for %d transcripts: the batch lane should need at most a third of one request per transcript", requests, n)
	}
	for _, it := range items[first.ID] {
		evs := events(t, e.ledger, it.RecordingID)
		named := false
		for _, ev := range evs {
			if ev.New == ledger.StateSubmitted && ev.Detail["manifest_key"] != nil {
				named = true
			}
		}
		if !named {
			t.Fatalf("recording %s: no submitted event names its manifest: %+v", it.RecordingID, evs)
		}
	}
}

// A generic-http vendor without batches answers 404 to the manifest: the
// scope is remembered, the manifest closes as unbatched, its recordings go
// one by one, and so does later batch work of that scope.
func TestBatchLaneFallsBackOneByOneWithoutVendorBatches(t *testing.T) {
	t.Parallel()
	const n = 6
	e := runToDeliveredWith(t, n, sttsim.Config{NoBatches: true}, batchLane(n), crmsim.Config{})
	ctx := context.Background()
	ms, err := e.ledger.Manifests(ctx, ledger.ManifestFilter{})
	if err != nil || len(ms) != 1 || ms[0].State != ledger.ManifestUnbatched {
		t.Fatalf("manifests %+v (%v), want one, unbatched", ms, err)
	}
	st := e.stt.Stats()
	if st.Batches != 0 || st.Accepted != n {
		t.Fatalf("the vendor accepted %d single transcriptions and %d batches; want %d and 0", st.Accepted, st.Batches, n)
	}
	if st.Transcriptions == nil || len(st.Transcriptions) != n {
		t.Fatalf("transcriptions %v", st.Transcriptions)
	}
	// A recording ingested now skips the manifests.
	files := writeMoreWAVs(t, e, 1)
	res, err := e.p.Ingest(ctx, e.client, jobs.IngestRequest{TenantID: "t1", CallID: "later", Audio: files[0]})
	if err != nil || res.JobID == 0 {
		t.Fatalf("a later recording of the scope: job %d (%v), want a transcribe job of its own", res.JobID, err)
	}
	rec := waitState(t, e, res.Recording.ID, ledger.StateCommitted)
	if got := len(e.stt.Stats().Transcriptions); got != n+1 || rec.State != ledger.StateCommitted {
		t.Fatalf("%d transcriptions, recording %s", got, rec.State)
	}
	if ms, _ := e.ledger.Manifests(ctx, ledger.ManifestFilter{}); len(ms) != 1 {
		t.Fatalf("%d manifests after the fallback, want 1", len(ms))
	}
}

// writeMoreWAVs writes k more recordings of t1 under e's audio root.
func writeMoreWAVs(t *testing.T, e *crmEnv, k int) []string {
	t.Helper()
	var out []string
	for i := range k {
		p := filepath.Join(e.root, fmt.Sprintf("t1/more-%03d.wav", i))
		jobstest.WriteWAV(t, p, 2*time.Second, 500+i)
		out = append(out, p)
	}
	return out
}

// waitState waits up to 30s for recording id to reach state (or any
// terminal one) and returns it.
func waitState(t *testing.T, e *crmEnv, id uuid.UUID, state ledger.State) ledger.Recording {
	t.Helper()
	var rec ledger.Recording
	reached := func() bool {
		var err error
		if rec, err = e.ledger.Recording(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return rec.State == state || rec.State.Terminal()
	}
	if !testwait.Until(30*time.Second, e.changes, reached) {
		t.Fatalf("recording %s is %s after 30s, want %s", id, rec.State, state)
	}
	return rec
}

// A manifest takes one vendor slot of the batch lane before its request
// and keeps it while the vendor processes it (extended at each poll),
// giving it back when its last item settles.
func TestManifestHoldsItsVendorSlotWhileProcessing(t *testing.T) {
	t.Parallel()
	const n = 10
	slots := &countingSlots{limit: 1, refusal: make(chan struct{}, 1)}
	e, files := setupWith(t, sttsim.Config{ProcessingTime: 400 * time.Millisecond}, batchLane(n), n,
		jobs.Deps{Slots: slots, SlotWait: 30 * time.Millisecond})
	manifestChanges := testwait.Changes(t, e.pool, "batch_manifests")
	ctx := context.Background()
	e.ingestAll(t, files)
	e.start(t)
	counts := e.waitSettled(t, 30*time.Second)
	if counts[ledger.StateValidated] != n {
		t.Fatalf("states %v, want all validated", counts)
	}
	// The manifest closes after its last item.
	var ms []ledger.Manifest
	closed := func() bool {
		var err error
		if ms, err = e.ledger.Manifests(ctx, ledger.ManifestFilter{}); err != nil {
			t.Fatal(err)
		}
		return len(ms) == 1 && ms[0].State == ledger.ManifestDone
	}
	if !testwait.Until(10*time.Second, manifestChanges, closed) {
		t.Fatalf("manifests %+v, want one done", ms)
	}
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if slots.extends == 0 || slots.stray != 0 || slots.held != 0 || slots.maxHeld != 1 {
		t.Fatalf("slot extended %d times (%d without a slot), %d held at the end, %d at most; want extended while processing, given back",
			slots.extends, slots.stray, slots.held, slots.maxHeld)
	}
	if st := e.sim.Stats(); st.Batches != 1 || st.Polls == 0 {
		t.Fatalf("the vendor saw %d batches and %d polls, want 1 manifest polled", st.Batches, st.Polls)
	}
}

// A vendor that throttles half the requests and fails some: manifests are
// deferred with their scope and sent again by their key, polls that fail
// are asked again, and still every recording is validated and transcribed
// once.
func TestBatchLaneUnderThrottling(t *testing.T) {
	t.Parallel()
	const n = 20
	cfg := batchLane(5)
	cfg.RetryAfter.MaxDelay = time.Second
	e, files := setup(t, sttsim.Config{RateLimitShare: 0.5, Cooldown: 200 * time.Millisecond, UnavailableShare: 0.1,
		ServerErrorShare: 0.1, ProcessingTime: 200 * time.Millisecond, Rand: rand.New(rand.NewPCG(11, 12))}, cfg, n)
	ctx := context.Background()
	e.ingestAll(t, files)
	e.start(t)
	counts := e.waitSettled(t, 60*time.Second)
	if counts[ledger.StateValidated] != n {
		t.Fatalf("states %v, want all validated", counts)
	}
	st := e.sim.Stats()
	if st.RateLimited == 0 {
		t.Fatal("the vendor never throttled: the test proves nothing")
	}
	for k, c := range st.Transcriptions {
		if c != 1 {
			t.Fatalf("%s transcribed %d times", k, c)
		}
	}
	exts, err := e.ledger.ScopeDeferralExtensions(ctx, e.pipeline.Config().Tenants["t1"].Scope)
	if err != nil || len(exts) == 0 {
		t.Fatalf("no scope deferral recorded for the throttled manifests (%v)", err)
	}
	t.Logf("%d batch requests, %d × 429, %d polls, %d deferrals", st.Batches, st.RateLimited, st.Polls, len(exts))
}

// An item the vendor cannot transcribe (audio it does not read) fails
// alone, with the vendor's reason; the manifest's other items complete.
func TestBatchLaneItemFailsAlone(t *testing.T) {
	t.Parallel()
	const n = 6
	e, files := setup(t, sttsim.Config{}, batchLane(n), n)
	ctx := context.Background()
	bad := e.ingestAll(t, files)[2]
	if err := os.WriteFile(files[2], []byte("not audio at all"), 0o600); err != nil { // after ingest: only the vendor sees it
		t.Fatal(err)
	}
	e.start(t)
	counts := e.waitSettled(t, 30*time.Second)
	if counts[ledger.StateValidated] != n-1 || counts[ledger.StateFailed] != 1 {
		t.Fatalf("states %v, want %d validated and 1 failed", counts, n-1)
	}
	rec, err := e.ledger.Recording(ctx, bad)
	if err != nil || rec.State != ledger.StateFailed {
		t.Fatalf("the unreadable recording is %s (%v)", rec.State, err)
	}
	evs := events(t, e.ledger, bad)
	if route, _ := evs[0].Detail["route"].(map[string]any); route == nil || !strings.HasSuffix(fmt.Sprint(route["reason"]), "; sent in the batch lane's manifests") {
		t.Fatalf("first event's route %v, want the batch lane's manifests named", evs[0].Detail["route"])
	}
	last := evs[len(evs)-1]
	if last.ResponseClass != "unsupported_media" || last.Detail["manifest_key"] == nil {
		t.Fatalf("its last event %+v, want the vendor's class and the manifest", last)
	}
	ms, err := e.ledger.Manifests(ctx, ledger.ManifestFilter{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("manifests %+v (%v), want 1: a failed item is not sent again", ms, err)
	}
	if st := e.sim.Stats(); len(st.Transcriptions) != n-1 {
		t.Fatalf("the vendor transcribed %d recordings, want %d", len(st.Transcriptions), n-1)
	}
}
