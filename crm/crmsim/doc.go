// Package crmsim is a simulated CRM that speaks crm-webhook/v1
// (docs/crm-webhook-v1.md), the protocol of callscribe's
// webhook CRM target: the "CRM double" that tests, `callscribe demo` and
// `callscribe replay` deliver to, to face callscribe with a CRM that
// throttles, fails, is slow and drops connections after applying, and to
// keep the evidence that every action set was applied exactly once.
//
// # Protocol
//
// New returns a Server; Handler serves it under httptest, ListenAndServe
// or Serve on a socket until a context ends. It has one route,
// POST /v1/action-sets, and checks a delivery in this order:
//
//   - Authorization: Bearer with one of Config.Tokens, else 401
//     unauthorized.
//   - Idempotency-Key present and X-Delivery-Attempt a whole number of 1
//     or more, else 400 invalid_request.
//   - Throttling (see below): 429 rate_limited, or 500, 502, 503, 504, even
//     for a key applied before.
//   - The body: JSON, at most MaxBodyBytes, else 400; then the fields
//     (422 when missing, of the wrong type or malformed): tenant_id,
//     call_id, action_version of 1 or more, recording_sha256, committed_at
//     in RFC 3339 UTC, actions with exactly one call_note, known kinds,
//     lanes and a YYYY-MM-DD due for rate_sheet_promised, shipment_ref and
//     an RFC 3339 window for pickup_window_change, a YYYY-MM-DD date for
//     next_call. The Idempotency-Key must be the body's
//     tenant_id:call_id:action_version (else 422). Unknown fields are
//     ignored.
//   - The key's history: a key seen for the first time is applied and
//     answered 201 {"id": "crm_N", "applied_at": ...}; the same key with the
//     same body is a replay, answered 200 with the original id and time;
//     the same key with a different body is 409 idempotency_key_reused.
//     Bodies are compared in a canonical form of their known fields, so
//     field order, white space, unknown fields and spellings of the same
//     UTC instant do not make a body different.
//
// A key is applied once even under concurrent deliveries: the first one
// records it under the Server's lock, the others are replays. Unknown
// paths get 404 and GET and friends on /v1/action-sets 405, with error
// bodies too.
//
// # Trouble and evidence
//
// Config.RateLimitShare refuses a delivery with 429 and starts a cooldown
// of Config.Cooldown for its token: until the deadline every delivery with
// that token is answered 429 with the time left, in Config.RetryAfterForm
// (delay-seconds or IMF-fixdate, rounded up so that a sender that honours
// it arrives at or after the deadline; none; or malformed values). Every
// answer's Date comes from Config.Clock too, so that a sender may measure
// an IMF-fixdate Retry-After against it.
// Config.ServerErrorShare answers 500, 502, 503 (with a Retry-After) or
// 504. Config.Latency delays every answer. Config.DropAfterApplyShare
// applies a new set, calls Config.OnApply, then resets the connection: the
// sender's retry must get 200. Config.OnApply alone lets a test kill the
// sender between the CRM's apply and its answer.
//
// Stats counts deliveries, distinct keys applied, replays, conflicts,
// 429s, 5xx, drops, refusals, and per key how many times it was applied
// (the promise: 1) and the body applied; ActionSets returns what the CRM
// holds.
//
// # What it does not do
//
// It keeps everything in memory and forgets it when the process ends.
// Trouble is random but reproducible for sequential traffic with a seeded
// Config.Rand; cooldowns follow Config.Clock. It logs no bodies and no
// tokens. It speaks only crm-webhook/v1, not the Salesforce or HubSpot
// APIs.
package crmsim
