package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/internal/idtext"
	"github.com/callscribe/callscribe/ledger"
)

// ErrUnknownTenant: the tenant is not in pipeline.tenants.
var ErrUnknownTenant = errors.New("unknown tenant")

// ErrNotReviewable: Retry was asked for a recording that is neither
// expired nor failed.
var ErrNotReviewable = errors.New("only expired or failed recordings can be retried")

// ErrJobRunning: Retry found the recording's job still running (it has
// just expired or failed the recording and is finishing, or it is in the
// middle of a step). Nothing was changed; try again in a moment.
var ErrJobRunning = errors.New("the recording's transcribe job is still running")

// ErrInvalidRequest matches every *RequestError with errors.Is.
var ErrInvalidRequest = errors.New("invalid ingest request")

// MaxIDLen is the longest TenantID or CallID Ingest takes, in bytes. An id
// is also sent to speech vendors (as an HTTP header) and to the CRM, so it
// is kept short and printable.
const MaxIDLen = 128

// RequestError is returned by Ingest for an IngestRequest field it refuses
// before anything is read or written.
type RequestError struct {
	// Field is the field's manifest name: tenant_id, call_id, model or
	// language.
	Field string
	// Detail says what is wrong, for people.
	Detail string
}

// Error names the field and the problem.
func (e *RequestError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Detail) }

// Is reports whether target is ErrInvalidRequest.
func (e *RequestError) Is(target error) bool { return target == ErrInvalidRequest }

// IngestRequest is one recording to take in.
type IngestRequest struct {
	// TenantID and CallID are 1 to MaxIDLen bytes of valid UTF-8 without
	// control characters (NUL, newline, DEL, C1 controls included),
	// invisible format characters (zero-width ones such as U+200B, the
	// byte-order mark, the bidirectional controls such as U+202E and
	// U+2066-U+2069) or line and paragraph separators (internal/idtext).
	TenantID string
	CallID   string
	// Audio is the recording's path: relative to the audio root, or an
	// absolute path / file:// URL under it.
	Audio string
	// Lane: immediate or batch. Default "": chosen by rule (see
	// Config.BatchCompletionBound): immediate when Deadline or
	// ActionDeadline is sooner than the batch lane's completion bound,
	// batch otherwise.
	Lane ledger.Lane
	// Deadline overrides the lane's deadline. Zero: the tenant's or lane's.
	Deadline time.Time
	// ActionDeadline is when the call's CRM follow-up is due (a promised
	// rate sheet by 5 pm), if the caller knows; it only routes. Zero:
	// none.
	ActionDeadline time.Time
	// Model and Language may be empty; otherwise they follow the rules
	// of TenantID and CallID.
	Model     string
	Language  string
	StartedAt time.Time
}

// validate refuses a request whose ids cannot be stored or sent as they
// are, naming the field.
func (r IngestRequest) validate() error {
	for _, f := range []struct {
		name, value string
		optional    bool
	}{{"tenant_id", r.TenantID, false}, {"call_id", r.CallID, false}, {"model", r.Model, true}, {"language", r.Language, true}} {
		if err := checkID(f.value, f.optional); err != "" {
			return &RequestError{Field: f.name, Detail: err}
		}
	}
	return nil
}

// checkID returns why id breaks the id rules, or "".
func checkID(id string, optional bool) string {
	switch {
	case id == "" && optional:
		return ""
	case id == "":
		return "empty"
	case len(id) > MaxIDLen:
		return fmt.Sprintf("%d bytes long, over the %d-byte limit", len(id), MaxIDLen)
	}
	return idtext.Problem(id)
}

// IngestResult says what Ingest did.
type IngestResult struct {
	ledger.IngestResult
	// Enqueued is true when a transcribe job was enqueued for it (false
	// when an active one already existed, the recording is terminal, or
	// the batch lane's manifests take it).
	Enqueued bool
	// JobID of the transcribe job enqueued; 0 when none was, or when
	// IngestMany copied the jobs of a chunk of new recordings in
	// (IngestCopyJobs), which returns no ids.
	JobID int64
	// Route is how a new recording's lane was chosen (recorded in its
	// first event); nil when the recording was already known.
	Route *ledger.IngestRoute
}

// Ingest refuses a request whose ids break IngestRequest's rules with a
// *RequestError naming the field, before anything is read. It reads the
// audio once (digest, size, WAV header), records the recording with its
// first two events (received, then received → eligible) and enqueues its
// transcribe job with client, in one transaction. Ingesting the same
// recording again converges on the existing row. It is IngestMany of one
// request.
func (p *Pipeline) Ingest(ctx context.Context, client *river.Client[pgx.Tx], req IngestRequest) (IngestResult, error) {
	res, err := p.IngestMany(ctx, client, []IngestRequest{req})
	var ce *ChunkError
	if errors.As(err, &ce) {
		return IngestResult{}, ce.Err
	}
	return res[0].IngestResult, res[0].Err
}

// Retry re-drives a reviewable (expired or failed) recording: back to
// eligible with a fresh deadline and a new job inserted with client,
// recorded as its own event.
// A job of the recording still waiting (snoozed or backing off) is made to
// run now instead; one still running refuses the retry with ErrJobRunning.
func (p *Pipeline) Retry(ctx context.Context, client *river.Client[pgx.Tx], id uuid.UUID, reason string) (ledger.Recording, error) {
	rec, err := p.ledger.Recording(ctx, id)
	if err != nil {
		return ledger.Recording{}, err
	}
	if rec.State != ledger.StateExpired && rec.State != ledger.StateFailed {
		return ledger.Recording{}, fmt.Errorf("recording %s is %s: %w", id, rec.State, ErrNotReviewable)
	}
	t := p.cfg.Tenants[rec.TenantID]
	deadline := p.cfg.deadlineFor(t, rec.Lane, p.cfg.Clock.Now())
	if reason == "" {
		reason = "operator retry"
	}
	var out ledger.Recording
	err = pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		out, err = p.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: id, From: rec.State, To: ledger.StateEligible,
			Reason: reason, ResponseClass: "operator", Deadline: &deadline})
		if err != nil {
			return err
		}
		return enqueueAgainTx(ctx, client, tx, rec)
	})
	return out, err
}

// enqueueAgainTx makes sure a job will drive rec after an operator moved it.
// River marks a job completed only after its Work returned, so the
// recording's previous job may still count as active: a waiting one (snoozed
// or backing off) is made to run now; a running one may already be done with
// the recording, so the operator's move is refused with ErrJobRunning (the
// caller's transaction rolls back; try again in a moment).
func enqueueAgainTx(ctx context.Context, client *river.Client[pgx.Tx], tx pgx.Tx, rec ledger.Recording) error {
	jr, err := client.InsertTx(ctx, tx, transcribeArgs(rec.ID, rec.TenantID, rec.Lane), nil)
	if err != nil || !jr.UniqueSkippedAsDuplicate {
		return err
	}
	if jr.Job.State == rivertype.JobStateRunning {
		return fmt.Errorf("recording %s: %w (job %d)", rec.ID, ErrJobRunning, jr.Job.ID)
	}
	_, err = client.JobRetryTx(ctx, tx, jr.Job.ID)
	return err
}
