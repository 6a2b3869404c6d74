package ledger_test

import (
	"testing"

	"github.com/callscribe/callscribe/internal/jsonkeys"
	"github.com/callscribe/callscribe/ledger"
)

// TestJSONFieldNames holds the JSON names of the ledger's values that
// users read (`callscribe jobs list --json`, `jobs show --json`): renaming a
// Go field must not rename them. docs/json.md documents each.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	jsonkeys.Check(t, ledger.Recording{},
		"id", "tenant_id", "call_id", "audio_sha256", "business_key", "state", "attempt", "lane",
		"audio_uri", "audio_bytes", "audio_duration_ns", "deadline", "created_at", "updated_at", "event_seq",
		"provider", "provider_id", "model", "language", "not_before", "started_at")
	jsonkeys.Check(t, ledger.Event{},
		"id", "recording_id", "seq", "prior_state", "new_state", "attempt", "at", "reason",
		"response_class", "retry_after_raw", "detail")
	jsonkeys.Check(t, ledger.Deferral{},
		"scope", "not_before", "updated_at", "needs_probe", "probe_job_id", "probe_claimed_at",
		"paused", "paused_reason", "paused_at", "seq")
	jsonkeys.Check(t, ledger.CooldownAccounting{},
		"submissions", "ignored_known_cooldown", "in_flight", "throttled", "throttled_ignored", "sent",
		"gap_p50", "gap_p99", "gap_max", "in_flight_gap_max", "ignored", "in_flight_list")
	jsonkeys.Check(t, ledger.SubmissionCheck{},
		"recording_id", "tenant_id", "call_id", "scope", "probe", "observe", "admitted_seq", "admitted_at", "sent_at",
		"throttled", "ignored_seq", "ignored_not_before", "in_flight_seq", "in_flight_recorded_at")
	jsonkeys.Check(t, ledger.Manifest{},
		"id", "manifest_key", "tenant_id", "provider", "model", "scope", "state", "vendor_batch_id", "items",
		"audio_seconds", "resubmission_of", "created_at", "updated_at")
	jsonkeys.Check(t, ledger.ManifestItem{},
		"manifest_id", "recording_id", "business_key", "position", "state", "provider_id", "reason", "updated_at",
		"manifest_key", "manifest_state")
	jsonkeys.Check(t, ledger.ManifestEvent{}, "id", "manifest_id", "at", "kind", "reason", "detail")
}
