package crm

import (
	"context"
	"time"
)

// ExtractInput is one validated transcript and what is known of its call.
type ExtractInput struct {
	TenantID string
	CallID   string
	// Text is the validated transcript.
	Text string
	// StartedAt is the call's start, with its offset. Relative dates
	// ("tomorrow", "next Wednesday") resolve against its calendar day in
	// Location. Zero: unknown, the extractor's clock says now.
	StartedAt time.Time
	// Location is the tenant's time zone: relative dates resolve in it and
	// pickup windows are expressed in it. nil: StartedAt's own zone (for a
	// zero StartedAt, UTC).
	Location *time.Location
}

// Extractor turns a transcript into the follow-ups of crm-webhook/v1.
// Implementations return exactly one call_note, first, followed by the
// other kinds the transcript supports. The rule-based one is
// extract.RuleExtractor.
type Extractor interface {
	Extract(ctx context.Context, in ExtractInput) ([]Action, error)
}
