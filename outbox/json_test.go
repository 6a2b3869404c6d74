package outbox_test

import (
	"testing"

	"github.com/callscribe/callscribe/internal/jsonkeys"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// TestJSONFieldNames holds the JSON names of outbox rows and their events
// (`callscribe outbox list --json`) and of replay runs: renaming a Go field
// must not rename them. docs/json.md documents each.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	jsonkeys.Check(t, outbox.Row{},
		"id", "action_set_id", "target", "scope", "idempotency_key", "state", "attempts", "crm_id",
		"last_class", "not_before", "created_at", "updated_at", "deadline", "tenant_id", "call_id")
	jsonkeys.Check(t, outbox.Listing{}, "pending", "oldest_pending_age_seconds", "counters", "rows")
	jsonkeys.Check(t, outbox.Event{},
		"attempt", "at", "prior_state", "new_state", "outcome", "response_class", "http_status",
		"crm_id", "retry_after_raw", "reason")
	// Replay runs, their reports (with the send counts) and their dead
	// deliveries (`callscribe replay --json`, `replay status --json`).
	jsonkeys.Check(t, outbox.ReplayRun{},
		"id", "target", "scope", "tenant_id", "recording_state", "from", "to", "started_by", "max_rate",
		"delivery_deadline_seconds", "state", "recordings_enumerated", "reason", "created_at", "updated_at",
		"finished_at", "report")
	jsonkeys.Check(t, outbox.ReplayReport{},
		"recordings_replayed", "audit_events_appended", "new_action_versions", "deliveries", "pending",
		"crm_effects_created", "answered_as_replays", "throttled", "transient", "dead", "cancelled", "tries",
		"withdrawn", "sends", "dead_list")
	jsonkeys.Check(t, outbox.ReplayDead{}, "action_set_id", "idempotency_key", "last_class", "reason")
	jsonkeys.Check(t, ledger.SendCounts{}, "sends", "ignored_known_cooldown", "in_flight")
}
