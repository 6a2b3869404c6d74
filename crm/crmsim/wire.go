package crmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// contentType is the Content-Type of every answer.
const contentType = "application/json; charset=utf-8"

// Error types of the answers. crm-webhook/v1 names only
// idempotency_key_reused; the others follow the same style.
const (
	errInvalidRequest       = "invalid_request"
	errUnauthorized         = "unauthorized"
	errNotFound             = "not_found"
	errMethodNotAllowed     = "method_not_allowed"
	errIdempotencyKeyReused = "idempotency_key_reused"
	errRateLimited          = "rate_limited"
	errServerError          = "server_error"
	errUnavailable          = "unavailable"
)

// apiError is the value of an error body's "error".
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// errorBody is the protocol's error body.
type errorBody struct {
	Error apiError `json:"error"`
}

// successBody is the body of 200 and 201.
type successBody struct {
	ID        string `json:"id"`
	AppliedAt string `json:"applied_at"`
}

// wireSet is the request body as sent, before validation: pointers tell a
// missing field from an empty one. Unknown fields are ignored.
type wireSet struct {
	TenantID        *string      `json:"tenant_id"`
	CallID          *string      `json:"call_id"`
	ActionVersion   *int         `json:"action_version"`
	RecordingSHA256 *string      `json:"recording_sha256"`
	CommittedAt     *string      `json:"committed_at"`
	Actions         []wireAction `json:"actions"`
}

type wireAction struct {
	Kind        string      `json:"kind"`
	Text        string      `json:"text"`
	Lanes       []string    `json:"lanes"`
	Due         string      `json:"due"`
	ShipmentRef string      `json:"shipment_ref"`
	Window      *wireWindow `json:"window"`
	Date        string      `json:"date"`
}

type wireWindow struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// problem is why a body was refused: 400 when it is not a JSON object,
// 422 when a field is missing, of the wrong type or malformed.
type problem struct {
	status  int
	message string
}

// decodeSet parses and validates a request body into an action set.
func decodeSet(body []byte) (crm.ActionSet, *problem) {
	var w wireSet
	if err := json.Unmarshal(body, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return crm.ActionSet{}, &problem{422, fmt.Sprintf("%s must be a JSON %s", te.Field, jsonKind(te))}
		}
		return crm.ActionSet{}, &problem{400, "the body must be a JSON object: " + err.Error()}
	}
	var s crm.ActionSet
	switch {
	case w.TenantID == nil || *w.TenantID == "":
		return s, &problem{422, "tenant_id is required"}
	case w.CallID == nil || *w.CallID == "":
		return s, &problem{422, "call_id is required"}
	case w.ActionVersion == nil || *w.ActionVersion < 1:
		return s, &problem{422, "action_version is required and must be 1 or more"}
	case w.RecordingSHA256 == nil || *w.RecordingSHA256 == "":
		return s, &problem{422, "recording_sha256 is required"}
	case w.CommittedAt == nil:
		return s, &problem{422, "committed_at is required"}
	case len(w.Actions) == 0:
		return s, &problem{422, "actions must hold at least the call_note"}
	}
	committed, err := parseUTC(*w.CommittedAt)
	if err != nil {
		return s, &problem{422, "committed_at " + err.Error()}
	}
	s = crm.ActionSet{
		TenantID: *w.TenantID, CallID: *w.CallID, ActionVersion: *w.ActionVersion,
		RecordingSHA256: *w.RecordingSHA256, CommittedAt: committed,
		Actions: make([]crm.Action, len(w.Actions)),
	}
	notes := 0
	for i, a := range w.Actions {
		act, msg := decodeAction(a)
		if msg != "" {
			return crm.ActionSet{}, &problem{422, fmt.Sprintf("actions[%d]: %s", i, msg)}
		}
		if act.Kind == crm.KindCallNote {
			notes++
		}
		s.Actions[i] = act
	}
	if notes != 1 {
		return crm.ActionSet{}, &problem{422, fmt.Sprintf("actions must hold exactly one call_note, not %d", notes)}
	}
	return s, nil
}

// decodeAction validates one action's kind and fields.
func decodeAction(a wireAction) (crm.Action, string) {
	act := crm.Action{Kind: crm.Kind(a.Kind)}
	switch act.Kind {
	case crm.KindCallNote:
		act.Text = a.Text
	case crm.KindRateSheetPromised:
		if len(a.Lanes) == 0 {
			return act, "rate_sheet_promised needs lanes"
		}
		if !isDate(a.Due) {
			return act, fmt.Sprintf("due %q must be YYYY-MM-DD", a.Due)
		}
		act.Lanes, act.Due = a.Lanes, a.Due
	case crm.KindPickupWindowChange:
		if a.ShipmentRef == "" {
			return act, "pickup_window_change needs shipment_ref"
		}
		if a.Window == nil {
			return act, "pickup_window_change needs window"
		}
		start, err1 := time.Parse(time.RFC3339, a.Window.Start)
		end, err2 := time.Parse(time.RFC3339, a.Window.End)
		if err1 != nil || err2 != nil {
			return act, "window start and end must be RFC 3339 times"
		}
		if end.Before(start) {
			return act, "window ends before it starts"
		}
		act.ShipmentRef, act.Window = a.ShipmentRef, &crm.Window{Start: start, End: end}
	case crm.KindNextCall:
		if !isDate(a.Date) {
			return act, fmt.Sprintf("date %q must be YYYY-MM-DD", a.Date)
		}
		act.Date = a.Date
	case "":
		return act, "kind is required"
	default:
		return act, fmt.Sprintf("unknown kind %q", a.Kind)
	}
	return act, ""
}

// parseUTC parses an RFC 3339 time that must be UTC.
func parseUTC(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q must be an RFC 3339 time", v)
	}
	if _, off := t.Zone(); off != 0 {
		return time.Time{}, fmt.Errorf("%q must be in UTC", v)
	}
	return t.UTC(), nil
}

// isDate reports whether v is a YYYY-MM-DD date.
func isDate(v string) bool {
	_, err := time.Parse(time.DateOnly, v)
	return err == nil && len(v) == len(time.DateOnly)
}

// jsonKind names the JSON type a field should have had.
func jsonKind(te *json.UnmarshalTypeError) string {
	switch te.Type.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array"
	case reflect.Struct, reflect.Pointer, reflect.Map:
		return "object"
	}
	return te.Type.String()
}

// canonical is the body's content in a form where two bodies that mean
// the same action set are byte-equal: the known fields only (unknown
// fields are ignored, as the protocol asks), in a fixed order, with
// committed_at in UTC and each time at its own precision. Two bodies that
// differ only in field order, white space, unknown fields or the spelling
// of the same UTC instant are the same; anything else is a different body.
func canonical(s crm.ActionSet) []byte {
	b, _ := json.Marshal(s) // crm.ActionSet holds only strings, ints, slices and times
	return b
}

// keyOf is the idempotency key the body implies.
func keyOf(s crm.ActionSet) string {
	return s.TenantID + ":" + s.CallID + ":" + strconv.Itoa(s.ActionVersion)
}

// sanitizeKey keeps a key fit for a log line.
func sanitizeKey(k string) string {
	if len(k) > 200 {
		k = k[:200]
	}
	return strings.ToValidUTF8(k, "\uFFFD")
}
