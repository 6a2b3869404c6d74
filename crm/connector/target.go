package connector

import (
	"context"
	"errors"
	"time"

	"github.com/callscribe/callscribe/crm"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// Delivery is one attempt to deliver one committed action set.
type Delivery struct {
	// Set is the committed action set; Set.IdempotencyKey() is what the
	// CRM sees as the key, the same on every attempt and every replay.
	Set crm.ActionSet
	// Attempt is 1 for the first try of this outbox row, counting up. The
	// webhook target sends it as X-Delivery-Attempt; values below 1 are
	// ErrInvalidDelivery.
	Attempt int
}

// Outcome is what the dispatcher does next. The values are stable strings.
type Outcome string

const (
	// OutcomeApplied: the CRM applied the set now. Mark the row delivered.
	OutcomeApplied Outcome = "applied"
	// OutcomeReplayed: the CRM had applied this key before; nothing changed
	// in the CRM. Mark the row delivered.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeDead: the CRM refused the set for good (bad request,
	// credentials, a key reused with another body, ambiguous records).
	// Never retry; move the row to a reviewable dead state.
	OutcomeDead Outcome = "dead"
	// OutcomeThrottled: the CRM's quota is spent. Defer the throttling
	// scope: Result.DeferUntil when set, else Result.VendorDelay when set
	// (retryafter's Policy.DecideDelay), else Result.RetryAfter
	// (Policy.Decide, which falls back to backoff when it is missing or
	// malformed).
	OutcomeThrottled Outcome = "throttled"
	// OutcomeTransient: retry with backoff. Whether the CRM applied the
	// set is unknown (a timeout may hide an applied set): the retry carries
	// the same key, so a CRM that applied it answers "replayed".
	OutcomeTransient Outcome = "transient"
)

// Result classes: short, stable strings for the ledger event and metrics.
// Result.Class is always one of these.
const (
	ClassApplied              = "applied"
	ClassReplayed             = "replayed"
	ClassIdempotencyKeyReused = "idempotency_key_reused"         // webhook 409: the key was applied with another body
	ClassConflict             = "conflict"                       // a 409 without that error type (webhook, hubspot)
	ClassInvalidRequest       = vendorhttp.ClassInvalidRequest   // 400, 422
	ClassUnauthorized         = vendorhttp.ClassUnauthorized     // 401
	ClassForbidden            = vendorhttp.ClassForbidden        // 403
	ClassNotFound             = vendorhttp.ClassNotFound         // 404: wrong URL, object or field
	ClassMultipleMatches      = "multiple_matches"               // salesforce 300: the external id matches several records
	ClassDuplicateValue       = "duplicate_value"                // salesforce DUPLICATE_VALUE on an upsert: a concurrent upsert of the same id
	ClassPartialFailure       = "partial_failure"                // hubspot 207: some inputs failed
	ClassRateLimited          = vendorhttp.ClassRateLimited      // 429 (hubspot: the rolling ten-second or secondly limit)
	ClassDailyLimitExceeded   = "daily_limit_exceeded"           // hubspot 429 DAILY
	ClassRequestLimitExceeded = "request_limit_exceeded"         // salesforce 403 REQUEST_LIMIT_EXCEEDED
	ClassUnavailable          = vendorhttp.ClassUnavailable      // 503
	ClassServerError          = vendorhttp.ClassServerError      // 500, 502, 504 and other 5xx
	ClassUnexpectedStatus     = vendorhttp.ClassUnexpectedStatus // a status no rule covers
	ClassUnexpectedRedirect   = "unexpected_redirect"            // a 3xx where none belongs: redirects are never followed
	ClassNetwork              = vendorhttp.ClassNetwork          // reset, refused, a malformed HTTP answer
	ClassTimeout              = vendorhttp.ClassTimeout          // Config.Timeout or the caller's deadline
	ClassCanceled             = vendorhttp.ClassCanceled         // the caller's context was canceled
	ClassBadResponse          = vendorhttp.ClassBadResponse      // a success whose body cannot be understood
	ClassResponseTooLarge     = vendorhttp.ClassResponseTooLarge // a success body over MaxResponseBytes
)

// Result is what one delivery came to. Every answer of the network or the
// CRM, however malformed, is a Result; see Target.
type Result struct {
	// Outcome says what to do next.
	Outcome Outcome
	// Class is a short, stable class (the Class* constants).
	Class string
	// HTTPStatus is the status of the answer that decided the Result (for
	// a target that makes several requests, the last one); 0 when no
	// answer arrived.
	HTTPStatus int
	// CRMID is the CRM's id of what was applied or found: the webhook's
	// "id"; the Salesforce record ids or HubSpot object ids, comma-joined
	// in action order. On a failure it holds the ids of the records
	// already upserted before it.
	CRMID string

	// RetryAfter is the raw Retry-After of the answer exactly as received
	// (several fields joined with ", "); nil if absent.
	RetryAfter *string
	// Date is the raw Date header of the same answer exactly as received;
	// nil if absent. The dispatcher measures an HTTP-date RetryAfter
	// against it (the CRM's clock) rather than its own clock when it is a
	// valid HTTP-date (retryafter's Policy.DecideFor).
	Date *string
	// VendorDelay is a delay read from a vendor-specific header (HubSpot's
	// X-HubSpot-RateLimit-Interval-Milliseconds on a rolling-window 429);
	// when set, prefer it to RetryAfter. VendorDelayHeader names the header
	// and VendorDelayRaw is its raw value; they are set even when the value
	// did not parse (VendorDelay then nil).
	VendorDelay       *time.Duration
	VendorDelayHeader string
	VendorDelayRaw    string
	// DeferUntil is an absolute deadline the vendor implies (HubSpot's
	// DAILY limit: the next midnight in the account's time zone); when set,
	// it is the best signal. DeferReason says where it comes from.
	DeferUntil  *time.Time
	DeferReason string
	// Gauges are usage figures the vendor reported on the way (Salesforce
	// Sforce-Limit-Info, HubSpot X-HubSpot-RateLimit-*), by metric name;
	// nil when there were none.
	Gauges map[string]float64

	// Message is the CRM's error message (or the network error), truncated
	// to MessageMaxBytes, with the token and any URL's query string or user
	// info removed.
	Message string
}

// Target is one CRM. Implementations are safe for concurrent use.
//
// A returned error means misuse or configuration only (ErrInvalidDelivery
// and errors of New). Everything the network or the CRM does (resets,
// timeouts, bodies that are not JSON, unexpected statuses, malformed
// headers) is a Result with an Outcome and a Class, and the error is nil.
type Target interface {
	// Name is the target's kind, as Config.Kind names it.
	Name() string
	// Deliver sends one action set once, without retrying.
	Deliver(ctx context.Context, d Delivery) (Result, error)
}

// ErrInvalidDelivery: the Delivery cannot be sent as it is (Attempt below
// 1, an action set that breaks crm-webhook/v1: no tenant or call, no
// actions, an unknown kind, a date that is not YYYY-MM-DD). It is wrapped
// with the reason.
var ErrInvalidDelivery = errors.New("crm target: invalid delivery")
