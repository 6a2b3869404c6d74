package crm

import (
	"fmt"
	"time"
)

// Kind names a follow-up action.
type Kind string

// The action kinds of crm-webhook/v1.
const (
	KindCallNote           Kind = "call_note"
	KindRateSheetPromised  Kind = "rate_sheet_promised"
	KindPickupWindowChange Kind = "pickup_window_change"
	KindNextCall           Kind = "next_call"
)

// Action is one follow-up, shaped as crm-webhook/v1 sends it. Only the
// fields of its Kind are set.
type Action struct {
	Kind Kind `json:"kind"`
	// call_note: a short summary plus the transcript excerpt.
	Text string `json:"text,omitempty"`
	// rate_sheet_promised: the lanes ("Chicago to Dallas") and the due date.
	Lanes []string `json:"lanes,omitempty"`
	Due   string   `json:"due,omitempty"` // YYYY-MM-DD
	// pickup_window_change: the shipment and its new window.
	ShipmentRef string  `json:"shipment_ref,omitempty"`
	Window      *Window `json:"window,omitempty"`
	// next_call: the agreed date.
	Date string `json:"date,omitempty"` // YYYY-MM-DD
}

// Window is a time range in the call's local time zone (RFC 3339 with offset).
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// ActionSet is the committed follow-ups of one call, in one version.
type ActionSet struct {
	TenantID        string    `json:"tenant_id"`
	CallID          string    `json:"call_id"`
	ActionVersion   int       `json:"action_version"`
	RecordingSHA256 string    `json:"recording_sha256"`
	CommittedAt     time.Time `json:"committed_at"`
	Actions         []Action  `json:"actions"`
}

// IdempotencyKey is what the CRM receives: tenant_id:call_id:action_version,
// the same on every retry and every replay.
func (s ActionSet) IdempotencyKey() string {
	return fmt.Sprintf("%s:%s:%d", s.TenantID, s.CallID, s.ActionVersion)
}
