package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/progress"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/render"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/jobs"
)

// ingestOptions are the flags of `callscribe ingest`: one recording, or a
// manifest.
type ingestOptions struct {
	one                      ingest.Item
	deadline, actionDeadline string // RFC 3339, parsed into one by Validate
	manifest                 string
}

// Validate wants one recording or a manifest, and parses --deadline and
// --action-deadline into the recording's item.
func (o *ingestOptions) Validate() error {
	if o.manifest == "" && (o.one.TenantID == "" || o.one.CallID == "" || o.one.Audio == "") {
		return errors.New("give --tenant, --call and --audio, or --manifest FILE")
	}
	if o.deadline != "" {
		d, err := time.Parse(time.RFC3339, o.deadline)
		if err != nil {
			return fmt.Errorf("--deadline %q: want RFC 3339, like 2026-11-30T18:00:00Z", o.deadline)
		}
		o.one.Deadline = &d
	}
	if o.actionDeadline != "" {
		d, err := time.Parse(time.RFC3339, o.actionDeadline)
		if err != nil {
			return fmt.Errorf("--action-deadline %q: want RFC 3339, like 2026-11-30T17:00:00Z", o.actionDeadline)
		}
		o.one.ActionDeadline = &d
	}
	return nil
}

func (a *commands) ingestCommand() *cobra.Command {
	var o ingestOptions
	cmd := &cobra.Command{
		Use:   "ingest (--tenant T --call C --audio PATH | --manifest FILE.jsonl)",
		Short: "Take in one recording, or every line of a JSONL manifest, and enqueue its transcription",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			e, err := a.OpenPipeline(ctx, app.Caps{})
			if err != nil {
				return err
			}
			defer e.Close()
			if o.manifest == "" {
				req, err := o.one.Request(ingest.Operator)
				if err != nil {
					return err
				}
				res, err := e.Jobs.Ingest(ctx, e.Client, req)
				if err != nil {
					return err
				}
				render.Ingest(out, res)
				return nil
			}
			return a.ingestManifest(cmd, e, o.manifest)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.one.TenantID, "tenant", "", "tenant id (must be in pipeline.tenants)")
	f.StringVar(&o.one.CallID, "call", "", "call id")
	f.StringVar(&o.one.Audio, "audio", "", "recording: a path under audio.root")
	f.StringVar(&o.one.Lane, "lane", "", "immediate or batch (default: by rule: immediate when --deadline or --action-deadline is sooner than pipeline.batch_completion_bound, else batch)")
	f.StringVar(&o.deadline, "deadline", "", "RFC 3339 deadline (default: the lane's)")
	f.StringVar(&o.actionDeadline, "action-deadline", "", "RFC 3339 time the call's CRM follow-up is due (routes only)")
	f.StringVar(&o.one.Model, "model", "", "speech model (default: the tenant's)")
	f.StringVar(&o.one.Language, "language", "", "ISO 639-1 language (default: auto-detect)")
	f.StringVar(&o.manifest, "manifest", "", "JSONL file: one {tenant_id, call_id, audio, lane, deadline, action_deadline, model, language, started_at} per line, each at most 64 KiB")
	return cmd
}

// manifestChunk is how many manifest lines ingest reads before writing
// them (with jobs.Pipeline.IngestMany, one transaction).
const manifestChunk = jobs.MaxIngestChunk

// ingestManifest streams the manifest at path: manifestChunk lines at a
// time are read, decoded and their audio read (jobs.PrepareIngest) while
// the chunks before are written (jobs.CommitIngest, one transaction each,
// ingestInFlight at once), and
// each bad line is reported with its number, in line order, as its chunk
// is done, so memory does not grow with the manifest.
func (a *commands) ingestManifest(cmd *cobra.Command, e *app.Pipeline, path string) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	defer func() { _ = f.Close() }()
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	bar := progress.New(a.Env.Stderr, "ingesting", size, progress.Bytes)
	mr := ingest.NewManifestReader(f)
	var created, known, bad, lineNo int
	report := func(line int, err error) {
		bad++
		_ = bar.Clear()
		fmt.Fprintf(a.Env.Stderr, "%s:%d: %v\n", path, line, err)
	}
	// The committer writes the chunks in order and reports their bad
	// lines (those refused when read, then those refused when written) in
	// line order; it alone touches the counts and the bar.
	prepared := make(chan manifestChunkRead, 1)
	committed := make(chan error, 1)
	go func() {
		committed <- a.commitManifest(ctx, e, path, prepared, cancel, report, bar, &created, &known)
	}()
	send := func(c manifestChunkRead) error {
		select {
		case prepared <- c:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	readErr := func() error {
		var c manifestChunkRead
		for {
			line, err := mr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("reading manifest %s after line %d: %w", path, lineNo, err)
			}
			lineNo++
			if line.Blank() {
				continue
			}
			m, err := line.Item()
			var req jobs.IngestRequest
			if err == nil {
				req, err = m.Request(ingest.Operator)
			}
			if err != nil {
				c.refused = append(c.refused, lineError{line: lineNo, err: err})
				continue
			}
			c.reqs, c.nums = append(c.reqs, req), append(c.nums, lineNo)
			if len(c.reqs) == manifestChunk {
				c.chunk, c.read = e.Jobs.PrepareIngest(ctx, c.reqs), mr.Read()
				if err := send(c); err != nil {
					// Stopped, or the committer failed (its error is
					// then the one told).
					return fmt.Errorf("ingest stopped after line %d: %w", lineNo, err)
				}
				c = manifestChunkRead{}
			}
		}
		if len(c.reqs) > 0 {
			c.chunk = e.Jobs.PrepareIngest(ctx, c.reqs)
		}
		c.read = mr.Read()
		if len(c.reqs) > 0 || len(c.refused) > 0 {
			if err := send(c); err != nil {
				return fmt.Errorf("ingest stopped after line %d: %w", lineNo, err)
			}
		}
		return nil
	}()
	close(prepared)
	if err := <-committed; err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	_ = bar.Finish()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%d ingested, %d already known, %d bad lines\n", created, known, bad)
	if bad > 0 {
		return fmt.Errorf("%d of %d lines were refused (listed above); the good ones were kept", bad, lineNo)
	}
	return nil
}

// manifestChunkRead is one chunk of a manifest as read: its requests
// (prepared: their audio read) with their line numbers, and the lines
// refused before it since the chunk before.
type manifestChunkRead struct {
	reqs    []jobs.IngestRequest
	nums    []int
	chunk   *jobs.IngestChunk
	refused []lineError
	read    int64 // manifest bytes read through this chunk
}

type lineError struct {
	line int
	err  error
}

// ingestInFlight is how many chunks commitManifest writes at once, each
// in its own transaction on its own connection: while one chunk's
// statements run in PostgreSQL, the next one's run in another backend,
// and the process prepares the one after (on two cores a chunk of 1,000
// took about 130 ms written alone, of which its insert 56 ms). Two
// chunks that share a call do not race: each takes its calls' locks in
// one order (RecordingLockCalls) before it reads their recordings, so the
// later one waits for the earlier one's commit and then sees its rows, as
// two ingest processes do.
const ingestInFlight = 2

// chunkWrite is one chunk being written: done is closed when res and err
// are set.
type chunkWrite struct {
	c    manifestChunkRead
	res  []jobs.IngestItemResult
	err  error
	done chan struct{}
}

// commitManifest writes the prepared chunks, ingestInFlight at a time,
// and reports each chunk, in order, as it ends: its bad lines in line
// order, its counts and the bar. It stops at the first chunk whose
// transaction fails (its error names the lines): the chunks before it were
// kept, and the one written beside it may have been (it is counted if
// so); ingesting the manifest again takes the rest and counts the lines
// already in as known.
func (a *commands) commitManifest(ctx context.Context, e *app.Pipeline, path string, prepared <-chan manifestChunkRead, stop func(),
	report func(int, error), bar progress.Reporter, created, known *int) error {
	var failed error
	finish := func(w *chunkWrite) {
		<-w.done
		c := w.c
		if w.err != nil {
			if failed == nil {
				failed = fmt.Errorf("%s: lines %d to %d: %w (the lines before them were kept; ingest the manifest again for the rest: the lines already in count as known)",
					path, c.nums[0], c.nums[len(c.nums)-1], w.err)
				stop() // the reader stops at its next chunk
			}
			return
		}
		bad := c.refused
		for k, r := range w.res {
			switch {
			case r.Err != nil:
				bad = append(bad, lineError{line: c.nums[k], err: r.Err})
			case r.Created:
				*created++
			default:
				*known++
			}
		}
		slices.SortStableFunc(bad, func(x, y lineError) int { return x.line - y.line })
		for _, b := range bad {
			report(b.line, b.err)
		}
		_ = bar.Set64(c.read)
	}
	var writing []*chunkWrite
	for c := range prepared {
		if failed != nil {
			continue // let the reader finish its send
		}
		w := &chunkWrite{c: c, done: make(chan struct{})}
		if c.chunk != nil {
			go func() {
				defer close(w.done)
				w.res, w.err = e.Jobs.CommitIngest(ctx, e.Client, c.chunk)
			}()
		} else {
			close(w.done)
		}
		writing = append(writing, w)
		if len(writing) == ingestInFlight {
			finish(writing[0])
			writing = writing[1:]
		}
	}
	for _, w := range writing {
		finish(w)
	}
	return failed
}
