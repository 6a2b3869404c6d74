package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/callscribe/callscribe/crm"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// webhook speaks crm-webhook/v1 (docs/crm-webhook-v1.md).
type webhook struct {
	ep *endpoint
}

func newWebhook(cfg Config) (Target, error) {
	ep, err := cfg.endpointFor(KindWebhook)
	if err != nil {
		return nil, err
	}
	return &webhook{ep: ep}, nil
}

// Name returns "webhook".
func (w *webhook) Name() string { return KindWebhook }

// webhookPath is where crm-webhook/v1 takes deliveries.
const webhookPath = "/v1/action-sets"

// webhookBody is the request body of crm-webhook/v1, in the protocol's
// field order.
type webhookBody struct {
	TenantID        string          `json:"tenant_id"`
	CallID          string          `json:"call_id"`
	ActionVersion   int             `json:"action_version"`
	RecordingSHA256 string          `json:"recording_sha256"`
	CommittedAt     string          `json:"committed_at"`
	Actions         []webhookAction `json:"actions"`
}

type webhookAction struct {
	Kind        crm.Kind       `json:"kind"`
	Text        string         `json:"text,omitempty"`
	Lanes       []string       `json:"lanes,omitempty"`
	Due         string         `json:"due,omitempty"`
	ShipmentRef string         `json:"shipment_ref,omitempty"`
	Window      *webhookWindow `json:"window,omitempty"`
	Date        string         `json:"date,omitempty"`
}

type webhookWindow struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// WebhookBody returns the crm-webhook/v1 request body of s, byte for byte
// what the webhook target sends: the protocol's fields in its order,
// committed_at in RFC 3339 UTC and the window in RFC 3339 with the call's
// own offset, both to the second (so that the body is the same whether the
// set comes from memory or from a store that keeps microseconds: a
// receiver compares bodies per key), dates as given (YYYY-MM-DD).
func WebhookBody(s crm.ActionSet) ([]byte, error) {
	b := webhookBody{
		TenantID:        s.TenantID,
		CallID:          s.CallID,
		ActionVersion:   s.ActionVersion,
		RecordingSHA256: s.RecordingSHA256,
		CommittedAt:     s.CommittedAt.UTC().Format(time.RFC3339),
		Actions:         make([]webhookAction, len(s.Actions)),
	}
	for i, a := range s.Actions {
		wa := webhookAction{
			Kind: a.Kind, Text: a.Text, Lanes: a.Lanes, Due: a.Due,
			ShipmentRef: a.ShipmentRef, Date: a.Date,
		}
		if a.Window != nil {
			wa.Window = &webhookWindow{
				Start: a.Window.Start.Format(time.RFC3339),
				End:   a.Window.End.Format(time.RFC3339),
			}
		}
		b.Actions[i] = wa
	}
	data, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("crm target: encoding the webhook body: %w", err)
	}
	return data, nil
}

// webhookSuccess is the body of 200 and 201.
type webhookSuccess struct {
	ID        string `json:"id"`
	AppliedAt string `json:"applied_at"`
}

// webhookError is the protocol's error body.
type webhookError struct {
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// Deliver sends POST /v1/action-sets with the Bearer token,
// Idempotency-Key (tenant_id:call_id:action_version) and
// X-Delivery-Attempt, and applies the protocol's response table:
//
//	201                                   applied (CRMID: the body's id)
//	200                                   replayed (CRMID: the original id)
//	409 idempotency_key_reused            dead, idempotency_key_reused
//	409 of another type                   dead, conflict
//	400, 422 / 401 / 403 / 404            dead: invalid_request / unauthorized / forbidden / not_found
//	429                                   throttled, rate_limited, Retry-After raw (may be missing or malformed)
//	503 with Retry-After                  throttled, unavailable (the dispatcher honours the header)
//	503 without / 500, 502, 504, other 5xx transient: unavailable / server_error
//	timeout, reset, malformed answer      transient: timeout / network
//	200 or 201 without a JSON id          transient, bad_response (the retry gets 200 if it was applied)
//	3xx                                   dead, unexpected_redirect (never followed)
//	another 4xx                           dead, unexpected_status
//	another status                        transient, unexpected_status
func (w *webhook) Deliver(ctx context.Context, d Delivery) (Result, error) {
	if err := checkDelivery(d); err != nil {
		return Result{}, err
	}
	body, err := WebhookBody(d.Set)
	if err != nil {
		return Result{}, err
	}
	rep, failed := w.ep.exchange(ctx, http.MethodPost, webhookPath, body, map[string]string{
		"Idempotency-Key":    d.Set.IdempotencyKey(),
		"X-Delivery-Attempt": strconv.Itoa(d.Attempt),
	})
	if failed != nil {
		return *failed, nil
	}
	return w.interpret(rep), nil
}

// interpret applies the response table.
func (w *webhook) interpret(rep vendorhttp.Reply) Result {
	switch rep.Status {
	case http.StatusCreated, http.StatusOK:
		var ok webhookSuccess
		if err := json.Unmarshal(rep.Body, &ok); err != nil {
			return w.ep.badResponse(rep, "unparseable success body: "+err.Error())
		}
		if ok.ID == "" {
			return w.ep.badResponse(rep, "success body without an id")
		}
		r := Result{Outcome: OutcomeApplied, Class: ClassApplied, HTTPStatus: rep.Status, CRMID: ok.ID}
		if rep.Status == http.StatusOK {
			r.Outcome, r.Class = OutcomeReplayed, ClassReplayed
		}
		return r
	}
	var e webhookError
	msg := vendorhttp.PlainText(rep)
	if json.Unmarshal(rep.Body, &e) == nil && e.Error != nil {
		msg = e.Error.Message
	}
	outcome, class := commonStatus(rep.Status, rep.Header)
	if rep.Status == http.StatusConflict && e.Error != nil && e.Error.Type == ClassIdempotencyKeyReused {
		class = ClassIdempotencyKeyReused
	}
	return w.ep.errorResult(rep, outcome, class, msg)
}
