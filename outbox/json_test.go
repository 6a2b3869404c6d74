package outbox_test

import (
	"testing"

	"github.com/callscribe/callscribe/internal/jsonkeys"
	"github.com/callscribe/callscribe/outbox"
)

// TestJSONFieldNames holds the JSON names of outbox rows and their events
// (`callscribe outbox list --json`): renaming a Go field must not rename
// them. docs/json.md documents each.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	jsonkeys.Check(t, outbox.Row{},
		"id", "action_set_id", "target", "scope", "idempotency_key", "state", "attempts", "crm_id",
		"last_class", "not_before", "created_at", "updated_at", "deadline", "tenant_id", "call_id")
	jsonkeys.Check(t, outbox.Listing{}, "pending", "oldest_pending_age_seconds", "counters", "rows")
	jsonkeys.Check(t, outbox.Event{},
		"attempt", "at", "prior_state", "new_state", "outcome", "response_class", "http_status",
		"crm_id", "retry_after_raw", "reason")
}
