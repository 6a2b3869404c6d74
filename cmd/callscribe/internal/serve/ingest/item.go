package ingest

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/idtext"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
)

// Item is one recording to ingest, as every way in gives it: a line of a
// JSONL manifest (`callscribe ingest --manifest`, the demo), the body of
// POST /v1/recordings or an item of POST /v1/recordings:batch, and the
// flags of `callscribe ingest`. Request is its one validation.
type Item struct {
	// TenantID: required from an admin or the operator; a tenant token
	// may omit it or repeat its own.
	TenantID string     `json:"tenant_id,omitempty"`
	CallID   string     `json:"call_id"`
	Audio    string     `json:"audio"`
	Lane     string     `json:"lane,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// ActionDeadline: when the call's CRM follow-up is due; it only
	// routes a recording that names no lane.
	ActionDeadline *time.Time `json:"action_deadline,omitempty"`
	Model          string     `json:"model,omitempty"`
	Language       string     `json:"language,omitempty"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	// ExpectedText is what the test manifests say was spoken (the demo
	// checks transcripts against it); ingest ignores it.
	ExpectedText string `json:"expected_text,omitempty"`
}

// For is whom an item is ingested for.
type For struct {
	// Admin: an admin token or the operator, whose items name their
	// tenant; otherwise Tenant, the one tenant a tenant token acts for.
	Admin  bool
	Tenant string
	// ConfineAudio requires the audio key to be a clean key under
	// "<tenant>/" with no control characters (the API, whose callers name
	// keys on the server); the operator's command line names any key
	// under audio.root, which the recordings store confines.
	ConfineAudio bool
}

// Operator is whom `callscribe ingest` and the demo ingest for.
var Operator = For{Admin: true}

// ItemError is a refused field of an item.
type ItemError struct {
	// Field is the JSON name of the field.
	Field string
	Msg   string
	// NotYours: the item names a tenant other than its principal's; the
	// API answers as if it did not exist.
	NotYours bool
}

func (e *ItemError) Error() string { return e.Field + ": " + e.Msg }

func itemError(field, format string, args ...any) *ItemError {
	return &ItemError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Request validates the item for f and returns the ingest request, or
// the first refused field as an *ItemError. That the tenant exists, and the audio, is the
// pipeline's to say (jobs.Pipeline.Ingest).
func (it Item) Request(f For) (jobs.IngestRequest, error) {
	tenant := it.TenantID
	switch {
	case f.Admin && tenant == "":
		return jobs.IngestRequest{}, itemError("tenant_id", "is required with an admin token")
	case !f.Admin && tenant == "":
		tenant = f.Tenant
	case !f.Admin && tenant != f.Tenant:
		return jobs.IngestRequest{}, &ItemError{Field: "tenant_id", Msg: "no such tenant", NotYours: true}
	}
	if it.CallID == "" {
		return jobs.IngestRequest{}, itemError("call_id", "is required")
	}
	if it.Audio == "" {
		return jobs.IngestRequest{}, itemError("audio", "is required: the recording's key under the recordings root, \"%s/...\"", tenant)
	}
	if f.ConfineAudio {
		if p := idtext.Problem(it.Audio); p != "" {
			return jobs.IngestRequest{}, itemError("audio", "%s", p)
		}
		// Confined to the tenant's part of the root: a clean relative
		// key under "<tenant>/".
		if strings.HasPrefix(it.Audio, "/") || strings.Contains(it.Audio, "://") || path.Clean(it.Audio) != it.Audio ||
			!strings.HasPrefix(it.Audio, tenant+"/") {
			return jobs.IngestRequest{}, itemError("audio", "must be a clean key under the tenant's part of the recordings root, \"%s/...\"", tenant)
		}
	}
	req := jobs.IngestRequest{TenantID: tenant, CallID: it.CallID, Audio: it.Audio, Model: it.Model, Language: it.Language}
	switch it.Lane {
	case "":
	case string(ledger.LaneImmediate), string(ledger.LaneBatch):
		req.Lane = ledger.Lane(it.Lane)
	default:
		return jobs.IngestRequest{}, itemError("lane", "%q: want immediate or batch", it.Lane)
	}
	if it.Deadline != nil {
		req.Deadline = *it.Deadline
	}
	if it.ActionDeadline != nil {
		req.ActionDeadline = *it.ActionDeadline
	}
	if it.StartedAt != nil {
		req.StartedAt = *it.StartedAt
	}
	return req, nil
}
