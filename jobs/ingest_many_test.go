package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/jobstest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// smallWAVs writes n short WAV files under root/t1 and returns their paths.
func smallWAVs(t testing.TB, root string, n int) []string {
	t.Helper()
	files := make([]string, n)
	for i := range n {
		files[i] = filepath.Join(root, "t1", fmt.Sprintf("bulk-%05d.wav", i))
		jobstest.WriteWAV(t, files[i], 20*time.Millisecond, i+1)
	}
	return files
}

// jobsByRecording counts the transcribe jobs of each recording, by River
// state.
func jobsByRecording(t testing.TB, pool *pgxpool.Pool) map[uuid.UUID]map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT (args->>'recording_id')::uuid, state::text, count(*) FROM river_job WHERE kind = 'transcribe' GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]map[string]int{}
	for rows.Next() {
		var id uuid.UUID
		var state string
		var n int
		if err := rows.Scan(&id, &state, &n); err != nil {
			t.Fatal(err)
		}
		if out[id] == nil {
			out[id] = map[string]int{}
		}
		out[id][state] += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Requests given twice converge on one recording, whether the repeat is
// in the same chunk or the next; every new recording is eligible with its
// two events; re-ingesting the whole slice creates nothing and enqueues
// nothing, not even for the recordings that have meanwhile ended.
func TestIngestManyConvergesWithinAndAcrossChunks(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, sttsim.Config{}, jobs.Config{}, 0)
	ctx := context.Background()
	const distinct = jobs.MaxIngestChunk * 3 / 5
	files := smallWAVs(t, e.root, distinct)
	// 0..distinct-1, then as many repeating them: the first repeats share
	// the first chunk with their originals, the last ones (from
	// MaxIngestChunk on) are in the next.
	var reqs []jobs.IngestRequest
	for range 2 {
		for i, f := range files {
			reqs = append(reqs, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%d", i), Audio: f})
		}
	}
	res, err := e.pipeline.IngestMany(ctx, e.client, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
		first := i < distinct
		// The first chunk's new recordings are many: their jobs are
		// copied in, enqueued without ids.
		if r.Created != first || r.Enqueued != first || r.JobID != 0 || r.CallIDReused {
			t.Fatalf("request %d: created=%v enqueued=%v job=%d reused=%v, want created and enqueued (by COPY, no id) only the first time",
				i, r.Created, r.Enqueued, r.JobID, r.CallIDReused)
		}
		if !first && r.Recording.ID != res[i-distinct].Recording.ID {
			t.Fatalf("request %d converged on %s, not on %s", i, r.Recording.ID, res[i-distinct].Recording.ID)
		}
		if r.Recording.State != ledger.StateEligible {
			t.Fatalf("request %d: %s, want eligible", i, r.Recording.State)
		}
	}
	evs, err := e.ledger.Events(ctx, res[0].Recording.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].New != ledger.StateReceived || evs[1].Prior != ledger.StateReceived ||
		evs[1].New != ledger.StateEligible || evs[1].Reason != jobs.ReadyForAdmission {
		t.Fatalf("events: %+v, want received then received → eligible", evs)
	}
	counts, err := e.ledger.CountByState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[ledger.StateEligible] != distinct || len(counts) != 1 {
		t.Fatalf("recordings by state: %v, want %d eligible", counts, distinct)
	}
	jobsOf := jobsByRecording(t, e.pool)
	if len(jobsOf) != distinct {
		t.Fatalf("%d recordings with a job, want %d", len(jobsOf), distinct)
	}

	// Ten of them end (failed), their jobs finished.
	var ended []uuid.UUID
	for _, r := range res[:10] {
		if _, err := e.ledger.Transition(ctx, ledger.Transition{RecordingID: r.Recording.ID, From: ledger.StateEligible,
			To: ledger.StateFailed, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		ended = append(ended, r.Recording.ID)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now()
		WHERE kind = 'transcribe' AND (args->>'recording_id')::uuid = ANY ($1)`, ended); err != nil {
		t.Fatal(err)
	}
	again, err := e.pipeline.IngestMany(ctx, e.client, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Err != nil || r.Created || r.Enqueued || r.JobID != 0 || r.Recording.ID != res[i].Recording.ID {
			t.Fatalf("re-ingest %d: %+v, want the same recording, nothing created or enqueued", i, r)
		}
	}
	after := jobsByRecording(t, e.pool)
	for id, states := range after {
		total := 0
		for _, n := range states {
			total += n
		}
		if total != 1 {
			t.Errorf("recording %s: jobs %v, want exactly one", id, states)
		}
	}
	for _, id := range ended {
		if after[id]["completed"] != 1 {
			t.Errorf("ended recording %s: jobs %v, want only its completed one", id, after[id])
		}
	}
}

// A call given again with other audio, in the same slice, is kept as a new
// recording flagged as a reused call id, naming the first.
func TestIngestManyFlagsAReusedCallIDWithinTheSlice(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{}, jobs.Config{}, 3)
	res, err := e.pipeline.IngestMany(context.Background(), e.client, []jobs.IngestRequest{
		{TenantID: "t1", CallID: "c", Audio: files[0]},
		{TenantID: "t1", CallID: "c", Audio: files[1]},
		{TenantID: "t1", CallID: "c", Audio: files[2]},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Created || res[0].CallIDReused {
		t.Fatalf("first: %+v", res[0])
	}
	for k, r := range res[1:] {
		if !r.Created || !r.CallIDReused || len(r.EarlierRecordings) != k+1 || r.EarlierRecordings[0] != res[0].Recording.ID {
			t.Fatalf("digest %d: created=%v reused=%v earlier=%v, want flagged naming the %d before", k+2, r.Created, r.CallIDReused, r.EarlierRecordings, k+1)
		}
	}
}

// Bad requests get the error Ingest gives them; the good ones of the same
// slice are written.
func TestIngestManyKeepsTheGoodOnes(t *testing.T) {
	t.Parallel()
	e, files := setup(t, sttsim.Config{}, jobs.Config{}, 2)
	jobstest.WriteWAV(t, filepath.Join(e.root, "t2", "x.wav"), time.Second, 9)
	res, err := e.pipeline.IngestMany(context.Background(), e.client, []jobs.IngestRequest{
		{TenantID: "t1", CallID: "good-1", Audio: files[0]},
		{TenantID: "t1", CallID: "a\x00b", Audio: files[1]},
		{TenantID: "nobody", CallID: "c", Audio: files[1]},
		{TenantID: "t1", CallID: "c", Audio: "t1/missing.wav"},
		{TenantID: "t1", CallID: "c", Audio: filepath.Join(e.root, "t2", "x.wav")},
		{TenantID: "t1", CallID: "good-2", Audio: files[1]},
	})
	if err != nil {
		t.Fatal(err)
	}
	var re *jobs.RequestError
	checks := []struct {
		ok   bool
		want string
	}{
		{res[0].Err == nil && res[0].Created, "created"},
		{errors.As(res[1].Err, &re) && re.Field == "call_id", "a call_id *RequestError"},
		{errors.Is(res[2].Err, jobs.ErrUnknownTenant), "ErrUnknownTenant"},
		{errors.Is(res[3].Err, audio.ErrNotFound), "audio.ErrNotFound"},
		{errors.As(res[4].Err, &re) && re.Field == "audio", "an audio *RequestError"},
		{res[5].Err == nil && res[5].Created && res[5].Enqueued && res[5].JobID != 0, "created with a job"},
	}
	for i, c := range checks {
		if !c.ok {
			t.Errorf("request %d: %+v (err %v), want %s", i, res[i].IngestResult, res[i].Err, c.want)
		}
	}
	counts, err := e.ledger.CountByState(context.Background())
	if err != nil || counts[ledger.StateEligible] != 2 {
		t.Fatalf("recordings: %v (%v), want the 2 good ones", counts, err)
	}
}

// Several ingesters writing overlapping slices at once, in different
// orders, converge on one recording per key with one active job each.
func TestIngestManyConcurrentIngestersConverge(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, sttsim.Config{}, jobs.Config{}, 0)
	ctx := context.Background()
	const distinct = 240
	files := smallWAVs(t, e.root, distinct)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		// Each takes 3/4 of the files, shifted, shuffled, with a few
		// in-slice repeats.
		var reqs []jobs.IngestRequest
		for k := range distinct * 3 / 4 {
			i := (k + g*distinct/4) % distinct
			reqs = append(reqs, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%d", i), Audio: files[i]})
		}
		reqs = append(reqs, reqs[:20]...)
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		rng.Shuffle(len(reqs), func(a, b int) { reqs[a], reqs[b] = reqs[b], reqs[a] })
		wg.Go(func() {
			for lo := 0; lo < len(reqs); lo += 50 {
				res, err := e.pipeline.IngestMany(ctx, e.client, reqs[lo:min(lo+50, len(reqs))])
				if err != nil {
					errs <- err
					return
				}
				for _, r := range res {
					if r.Err != nil {
						errs <- r.Err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var rows, keys int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT business_key) FROM recordings`).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	if rows != distinct || keys != distinct {
		t.Fatalf("%d recordings, %d keys, want %d of each", rows, keys, distinct)
	}
	jobsOf := jobsByRecording(t, e.pool)
	if len(jobsOf) != distinct {
		t.Fatalf("%d recordings with jobs, want %d", len(jobsOf), distinct)
	}
	for id, states := range jobsOf {
		if states["available"] != 1 || len(states) != 1 {
			t.Errorf("recording %s: jobs %v, want one available", id, states)
		}
	}
}

// The runtime role may ingest in bulk: insert rows and events, move them
// to eligible and insert the jobs.
func TestIngestManyAsRuntimeRole(t *testing.T) {
	t.Parallel()
	pool := testdb.AsRuntime(t, testdb.New(t))
	root := t.TempDir()
	files := smallWAVs(t, root, 3)
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := audio.Open(context.Background(), audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	p, err := jobs.New(pool, l, jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"t1": {Provider: "generic-http", BaseURL: "http://127.0.0.1:1", APIKey: "k"}}}, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobstest.NewClient(pool, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []jobs.IngestRequest
	for i, f := range append(files, files[0]) {
		reqs = append(reqs, jobs.IngestRequest{TenantID: "t1", CallID: fmt.Sprintf("call-%d", i%3), Audio: f})
	}
	res, err := p.IngestMany(context.Background(), client, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Created != (i < 3) || r.Recording.State != ledger.StateEligible {
			t.Fatalf("request %d as the runtime role: %+v (%v)", i, r.IngestResult, r.Err)
		}
	}
}
