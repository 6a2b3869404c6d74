package capacity_test

import (
	"testing"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/jsonkeys"
)

// TestJSONFieldNames holds the JSON names of a provider's capacity status:
// the same names GET /v1/status answers with, so that a Go caller that
// marshals Leases.Status gets what an HTTP client gets. docs/json.md
// documents each.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	jsonkeys.Check(t, capacity.ProviderStatus{},
		"provider", "kind", "in_use", "configured_limit", "effective_limit", "learned", "peak_per_minute")
	jsonkeys.Check(t, capacity.MinutePeak{}, "minute", "peak")
	jsonkeys.Check(t, capacity.WindowState{}, "scope", "size", "target", "ceiling", "ceiling_at", "proven", "in_flight", "waiting",
		"hold_ms", "phase", "updated_at")
	jsonkeys.Check(t, capacity.WindowEvent{}, "at", "kind", "from", "to", "reason")
}
