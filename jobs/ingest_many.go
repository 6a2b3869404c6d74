package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
)

// MaxIngestChunk is the most recordings IngestMany writes in one
// transaction. A longer slice is written in chunks of this size, one
// transaction each, in order.
const MaxIngestChunk = 1000

// IngestInspectors is how many recordings IngestMany reads at once to
// compute their digest, size and duration.
const IngestInspectors = 8

// IngestCopyJobs is how many new recordings a chunk must hold for their
// transcribe jobs to be copied in (River's InsertManyFastTx, COPY) rather
// than inserted one statement with a unique check each: COPY returns no
// job ids, so those items are Enqueued with JobID 0.
const IngestCopyJobs = 64

// ReadyForAdmission is the reason of a new recording's second event,
// received → eligible, written by the ingest's own transaction.
const ReadyForAdmission = ledger.EligibleReasonDefault

// IngestItemResult is one request's part of IngestMany.
type IngestItemResult struct {
	IngestResult
	// Err is why this request was refused or not written, the error
	// Ingest would have returned for it (a *RequestError, ErrUnknownTenant,
	// an audio error, or a *ChunkError when its chunk's transaction
	// failed). Nil when IngestResult holds.
	Err error
}

// ChunkError is the failure of one chunk's transaction: nothing of
// requests First to Last (indexes into IngestMany's slice, inclusive) was
// written, and IngestMany wrote no later chunk.
type ChunkError struct {
	First, Last int
	Err         error
}

// Error names the chunk.
func (e *ChunkError) Error() string {
	return fmt.Sprintf("ingesting requests %d to %d in one transaction: %v", e.First, e.Last, e.Err)
}

// Unwrap returns the transaction's error.
func (e *ChunkError) Unwrap() error { return e.Err }

// IngestMany is Ingest for many recordings, with per-recording results in
// the order of reqs. Each request is checked as Ingest checks it and its
// audio read once, at most IngestInspectors at a time; a refused one gets
// its Err and the others go on. Then each chunk of at most MaxIngestChunk
// recordings is written in one transaction: every new row with its two
// events (received, then received → eligible "ready for admission") in a
// fixed number of statements, and every transcribe job in one River
// InsertManyTx (the jobs of IngestCopyJobs or more new recordings by COPY,
// InsertManyFastTx: Enqueued, JobID 0). It converges on the business key
// as Ingest does, within reqs too: the second of two equal requests gets
// the first's recording, Created and Enqueued false, JobID 0. A recording
// already terminal gets no job.
//
// The error is a *ChunkError when a chunk's transaction failed: the
// chunks before it are written, that one and those after it are not (their
// items carry the error). The next chunk's audio is read while a chunk is
// written (PrepareIngest, CommitIngest).
func (p *Pipeline) IngestMany(ctx context.Context, client *river.Client[pgx.Tx], reqs []IngestRequest) ([]IngestItemResult, error) {
	out := make([]IngestItemResult, len(reqs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prepared := make(chan *IngestChunk, 1)
	go func() {
		defer close(prepared)
		for lo := 0; lo < len(reqs); lo += MaxIngestChunk {
			c := p.PrepareIngest(ctx, reqs[lo:min(lo+MaxIngestChunk, len(reqs))])
			select {
			case prepared <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	lo := 0
	for c := range prepared {
		hi := lo + len(c.reqs)
		res, err := p.CommitIngest(ctx, client, c)
		copy(out[lo:hi], res)
		if err != nil {
			cancel()
			ce := &ChunkError{First: lo, Last: hi - 1, Err: err}
			for i := lo; i < len(reqs); i++ {
				if i >= hi || out[i].Err == nil {
					out[i] = IngestItemResult{Err: ce}
				}
			}
			for range prepared { // let the reader stop
			}
			return out, ce
		}
		lo = hi
	}
	if err := ctx.Err(); err != nil && lo < len(reqs) {
		ce := &ChunkError{First: lo, Last: len(reqs) - 1, Err: err}
		for i := lo; i < len(reqs); i++ {
			out[i] = IngestItemResult{Err: ce}
		}
		return out, ce
	}
	return out, nil
}

// IngestChunk is up to MaxIngestChunk ingest requests checked and their
// audio read (PrepareIngest), not yet written (CommitIngest).
type IngestChunk struct {
	reqs []IngestRequest
	news []ledger.NewRecording
	out  []IngestItemResult
}

// PrepareIngest checks reqs (at most MaxIngestChunk) as Ingest checks
// them and reads each one's audio once, IngestInspectors at a time,
// writing nothing: a caller streaming a manifest reads the next chunk
// while CommitIngest writes the last.
func (p *Pipeline) PrepareIngest(ctx context.Context, reqs []IngestRequest) *IngestChunk {
	if len(reqs) > MaxIngestChunk {
		panic(fmt.Sprintf("jobs.PrepareIngest: %d requests, at most %d", len(reqs), MaxIngestChunk))
	}
	c := &IngestChunk{reqs: reqs, news: make([]ledger.NewRecording, len(reqs)), out: make([]IngestItemResult, len(reqs))}
	now := p.cfg.Clock.Now()
	files := p.audio.Session() // each tenant's directory opened once for the chunk
	defer func() { _ = files.Close() }()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(IngestInspectors, len(reqs)) {
		wg.Go(func() {
			for i := range next {
				c.news[i], c.out[i].Err = p.prepare(ctx, files, reqs[i], now)
			}
		})
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	return c
}

// CommitIngest writes a prepared chunk in one transaction (see IngestMany)
// and returns its per-request results, in order. An error is the
// transaction's: nothing of the chunk was written, and the results hold
// only the requests refused before it (the others' Err is nil and their
// IngestResult zero).
func (p *Pipeline) CommitIngest(ctx context.Context, client *river.Client[pgx.Tx], c *IngestChunk) ([]IngestItemResult, error) {
	reqs, news, out := c.reqs, c.news, c.out
	var good []int
	var batch []ledger.NewRecording
	for i := range reqs {
		if out[i].Err == nil {
			good = append(good, i)
			batch = append(batch, news[i])
		}
	}
	if len(batch) == 0 {
		return out, nil
	}
	results := make([]IngestItemResult, len(good))
	err := pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		irs, err := p.ledger.IngestManyTx(ctx, tx, batch, ledger.IngestManyOptions{EligibleReason: ReadyForAdmission})
		if err != nil {
			return err
		}
		// One job per recording still to be driven, the first item naming
		// it holding the job's id. A recording this transaction created
		// cannot have a job yet, so theirs are copied in (COPY, no unique
		// check to lose) when there are many; a known recording's goes
		// through River's unique insert, which skips an active one.
		var fresh, known []river.InsertManyParams
		var freshItems []int
		first := map[uuid.UUID]int{}
		for k, ir := range irs {
			results[k] = IngestItemResult{IngestResult: IngestResult{IngestResult: ir.IngestResult}, Err: ir.Err}
			if ir.Err == nil && ir.Created {
				results[k].Route = batch[k].Route
			}
			rec := ir.Recording
			if ir.Err != nil || rec.State.Terminal() {
				continue
			}
			if _, ok := first[rec.ID]; ok {
				continue
			}
			if rec.Lane == ledger.LaneBatch && p.manifestMode(rec.TenantID) {
				continue // the batch lane's manifests take it (FormManifests)
			}
			first[rec.ID] = k
			args := transcribeArgs(rec.ID, rec.TenantID, rec.Lane)
			if ir.Created && batch[k].Route != nil && batch[k].Route.OneByOne {
				args.Priority = PriorityOneByOne
			}
			if ir.Created {
				fresh, freshItems = append(fresh, river.InsertManyParams{Args: args}), append(freshItems, k)
			} else {
				known = append(known, river.InsertManyParams{Args: args})
			}
		}
		if len(fresh) >= IngestCopyJobs {
			if _, err := client.InsertManyFastTx(ctx, tx, fresh); err != nil {
				return fmt.Errorf("enqueueing %d transcriptions of new recordings: %w", len(fresh), err)
			}
			for _, k := range freshItems {
				results[k].Enqueued = true
			}
		} else {
			known = append(known, fresh...)
		}
		if len(known) == 0 {
			return nil
		}
		jrs, err := client.InsertManyTx(ctx, tx, known)
		if err != nil {
			return fmt.Errorf("enqueueing %d transcriptions: %w", len(known), err)
		}
		for _, jr := range jrs {
			if jr.UniqueSkippedAsDuplicate {
				continue
			}
			var args TranscribeArgs
			if err := json.Unmarshal(jr.Job.EncodedArgs, &args); err != nil {
				return fmt.Errorf("reading back transcribe job %d: %w", jr.Job.ID, err)
			}
			k, ok := first[args.RecordingID]
			if !ok {
				return fmt.Errorf("transcribe job %d names recording %s, not of this chunk", jr.Job.ID, args.RecordingID)
			}
			results[k].JobID, results[k].Enqueued = jr.Job.ID, true
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	for k, i := range good {
		out[i] = results[k]
	}
	return out, nil
}

// prepare checks req as Ingest does and reads its audio: the ledger's
// NewRecording, or why req is refused.
func (p *Pipeline) prepare(ctx context.Context, files *audio.Session, req IngestRequest, now time.Time) (ledger.NewRecording, error) {
	if err := req.validate(); err != nil {
		return ledger.NewRecording{}, err
	}
	t, ok := p.cfg.Tenants[req.TenantID]
	if !ok {
		known := make([]string, 0, len(p.cfg.Tenants))
		for id := range p.cfg.Tenants {
			known = append(known, id)
		}
		sort.Strings(known)
		return ledger.NewRecording{}, fmt.Errorf("%w %q (configured: %s)", ErrUnknownTenant, req.TenantID, strings.Join(known, ", "))
	}
	// The key's text first (Name), and the tenant's part of the root, before
	// any file is touched; Inspect's walk of the key then refuses what
	// Key's would (links that lead outside or nowhere), once.
	key, err := files.Name(req.Audio)
	if err != nil {
		return ledger.NewRecording{}, err
	}
	// Each tenant reads only its own part of the recordings root.
	if !strings.HasPrefix(key, req.TenantID+"/") {
		return ledger.NewRecording{}, &RequestError{Field: "audio",
			Detail: fmt.Sprintf("%q is outside the tenant's part of the recordings root (%s/...)", key, req.TenantID)}
	}
	var info audio.Info
	if info, err = files.Inspect(ctx, key); err != nil {
		// As Key names it: what the request says.
		return ledger.NewRecording{}, audio.NamedAs(err, req.Audio)
	}
	route := p.cfg.route(req, p.providers[req.TenantID], now)
	lane := route.Lane
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline = p.cfg.deadlineFor(t, lane, now)
	}
	return ledger.NewRecording{
		TenantID: req.TenantID, CallID: req.CallID, AudioSHA256: info.SHA256, Lane: lane,
		AudioURI: key, AudioBytes: info.Bytes, AudioDuration: info.Duration, Deadline: deadline, Model: req.Model, Language: req.Language,
		StartedAt: req.StartedAt, Route: &route,
	}, nil
}
