package jobs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

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
	// control characters (NUL, newline, DEL, C1 controls included).
	TenantID string
	CallID   string
	// Audio is the recording's path: relative to the audio root, or an
	// absolute path / file:// URL under it.
	Audio string
	// Lane: immediate or batch. Default batch.
	Lane ledger.Lane
	// Deadline overrides the lane's deadline. Zero: the tenant's or lane's.
	Deadline time.Time
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
	case !utf8.ValidString(id):
		return "not valid UTF-8"
	}
	for i, c := range id {
		if unicode.IsControl(c) {
			return fmt.Sprintf("control character %U at byte %d", c, i)
		}
	}
	return ""
}

// IngestResult says what Ingest did.
type IngestResult struct {
	ledger.IngestResult
	// JobID of the transcribe job; 0 when an active one already existed.
	JobID int64
}

// Ingest refuses a request whose ids break IngestRequest's rules with a
// *RequestError naming the field, before anything is read. It reads the audio once (digest, size, WAV header), records the
// recording and enqueues its transcribe job with client in one
// transaction. Ingesting the same recording again converges on the
// existing row.
func (p *Pipeline) Ingest(ctx context.Context, client *river.Client[pgx.Tx], req IngestRequest) (IngestResult, error) {
	if err := req.validate(); err != nil {
		return IngestResult{}, err
	}
	t, ok := p.cfg.Tenants[req.TenantID]
	if !ok {
		known := make([]string, 0, len(p.cfg.Tenants))
		for id := range p.cfg.Tenants {
			known = append(known, id)
		}
		sort.Strings(known)
		return IngestResult{}, fmt.Errorf("%w %q (configured: %s)", ErrUnknownTenant, req.TenantID, strings.Join(known, ", "))
	}
	key, err := p.audio.Key(req.Audio)
	if err != nil {
		return IngestResult{}, err
	}
	// Each tenant reads only its own part of the recordings root.
	if !strings.HasPrefix(key, req.TenantID+"/") {
		return IngestResult{}, &RequestError{Field: "audio",
			Detail: fmt.Sprintf("%q is outside the tenant's part of the recordings root (%s/...)", key, req.TenantID)}
	}
	info, err := p.audio.Inspect(ctx, key)
	if err != nil {
		return IngestResult{}, err
	}
	lane := req.Lane
	if lane == "" {
		lane = ledger.LaneBatch
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline = p.cfg.deadlineFor(t, lane, p.cfg.Clock.Now())
	}
	var res IngestResult
	err = pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		ir, err := p.ledger.IngestTx(ctx, tx, ledger.NewRecording{
			TenantID: req.TenantID, CallID: req.CallID, AudioSHA256: info.SHA256, Lane: lane,
			AudioURI: key, AudioBytes: info.Bytes, AudioDuration: info.Duration, Deadline: deadline, Model: req.Model, Language: req.Language,
			StartedAt: req.StartedAt,
		})
		if err != nil {
			return err
		}
		res.IngestResult = ir
		if ir.Recording.State.Terminal() {
			return nil
		}
		jr, err := client.InsertTx(ctx, tx, transcribeArgs(ir.Recording.ID, ir.Recording.TenantID, lane), nil)
		if err != nil {
			return fmt.Errorf("enqueueing transcription: %w", err)
		}
		if !jr.UniqueSkippedAsDuplicate {
			res.JobID = jr.Job.ID
		}
		return nil
	})
	return res, err
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
