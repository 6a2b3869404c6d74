// Package connector delivers committed action sets to CRMs: one Target
// interface and three targets that speak to a CRM over HTTP with
// net/http.
//
//	kind        API                                                          requests per set
//	webhook     crm-webhook/v1: POST /v1/action-sets (docs/crm-webhook-v1.md)  1
//	salesforce  REST upsert by external ID: PATCH .../sobjects/{SObject}/{Field}/{id}  1 per action
//	hubspot     CRM v3 batch upsert: POST /crm/v3/objects/{notes,tasks}/batch/upsert  1 or 2
//
// New builds one from a Config (kind, base URL, token, an injectable
// *http.Client, a per-exchange timeout, and the vendors' object and field
// names), each field with a documented default.
//
// # What it guarantees
//
// Every delivery is idempotent at the CRM. The webhook carries the set's
// idempotency key (tenant_id:call_id:action_version) as Idempotency-Key
// and the attempt number as X-Delivery-Attempt; Salesforce and HubSpot
// upsert each action by a stable external id derived from the key and the
// action's index (ExternalID), so a retry or a replay finds and updates
// the same records instead of creating new ones.
//
// Every answer the network or the CRM gives becomes a Result: an Outcome
// the dispatcher acts on (applied, replayed, dead, throttled, transient),
// a short stable Class for the ledger event and metrics, the HTTP status
// and the CRM's ids. Connection resets, timeouts, bodies that are not JSON
// or not the CRM's shape, bodies over MaxResponseBytes and statuses no
// rule covers are Results, never an error or a panic. A returned error
// means misuse or configuration only: ErrInvalidDelivery, or New's errors,
// which name the Config field at fault.
//
// Timing signals are reported, never acted on: the Retry-After of the
// answer exactly as received (RetryAfter) with the answer's Date (Date),
// a vendor's own window header (VendorDelay with VendorDelayHeader and
// VendorDelayRaw: HubSpot's rolling ten-second limit), and an absolute
// deadline the vendor implies (DeferUntil with DeferReason: HubSpot's
// daily limit resets at midnight in the account's time zone). The
// dispatcher turns them into the throttling scope's deadline with
// ledger/retryafter, the same shared deferral the speech vendors feed (an
// HTTP-date Retry-After measured against Date when that is valid). Usage figures the CRM reports on the way
// (Salesforce's Sforce-Limit-Info, HubSpot's X-HubSpot-RateLimit-*) are
// Gauges.
//
// Credentials stay in: the token, and any URL's query string or user
// info, are removed from every Result.Message and every error; Config's
// String, GoString and LogValue leave the token out; the targets log
// nothing. Redirects are never followed. A BaseURL with scheme http is
// refused unless its host is loopback (127.0.0.0/8, ::1, "localhost") or
// Config.AllowInsecureHTTP is set.
//
// # What it does not do
//
// It keeps no state between calls and does not retry: deciding when to
// retry or give up, and extending the shared throttling deadline, are the
// dispatcher's job (package outbox). It does not refresh OAuth tokens (a
// 401 is dead until the token is replaced), create the Salesforce external
// ID field or the HubSpot unique property it upserts by, or associate the
// records with contacts, accounts or deals.
package connector
