// Package retryafter turns a throttling signal from a speech vendor or a CRM
// (HTTP 429, or 503 with Retry-After) into a deadline, "not before", for the
// shared throttling scope.
//
// # Parsing
//
// Parse reads an HTTP Retry-After field value as RFC 9110 §10.2.3 defines
// it: delay-seconds (1*DIGIT) or an HTTP-date in any of the three forms
// recipients must accept (RFC 9110 §5.6.7):
//
//	120                              delay-seconds
//	Sun, 06 Nov 1994 08:49:37 GMT    IMF-fixdate
//	Sunday, 06-Nov-94 08:49:37 GMT   RFC 850 (obsolete)
//	Sun Nov  6 08:49:37 1994         asctime (obsolete)
//
// Surrounding spaces and tabs are ignored; the dates are case-sensitive and
// must say GMT where the grammar has it; a leap second (:60) is accepted; an
// RFC 850 two-digit year more than 50 years in the future means the most
// recent past year with those digits. A delay-seconds too large for a
// time.Duration is not an error: Value.Overflow marks it. Every failure is
// a *ParseError whose Reason (empty, negative, fractional, non-numeric) a
// caller can branch on and record.
//
// # Deciding
//
// Policy.DecideFor (or Policy.Decide, for a caller without the response's
// Date header) applies the policy to one response and returns a Decision:
//
//   - a valid delay-seconds (0 included) or a future HTTP-date is used;
//   - an HTTP-date names an instant on the server's clock: Policy.DecideFor
//     measures it against the response's own Date header when that is a
//     valid HTTP-date (delay = Retry-After date - Date), so that a host
//     whose clock runs fast or slow still waits what the server asked, and
//     against the host's clock otherwise (Policy.Decide always does);
//     Decision.DateReference says which;
//   - a value above Policy.MaxDelay, including an overflowing one, is
//     clamped to MaxDelay, and the Decision says Clamped and what was
//     Requested;
//   - a missing, empty, negative, fractional or malformed value, or a date
//     not after its reference, falls back to capped exponential backoff
//     with full jitter, and the Decision's Fallback says why.
//
// Hence 0 <= Delay <= MaxDelay and NotBefore = now + Delay >= now, always,
// now being the host's clock. The Decision
// carries the raw header, its form and the outcome, so that the caller can
// append exactly what happened to the event history. Policy.DecideDelay does
// the same for a vendor that states its delay in a header of its own.
//
// Time and randomness are injected (Policy.Clock, Policy.Rand); the zero
// Policy uses the real clock and math/rand/v2 with documented defaults.
//
// # What it does not do
//
// It stores nothing and holds no state between calls. Persisting the
// deadline, sharing it between workers, and never moving it backwards
// (GREATEST of the stored and the new NotBefore) is the job of the ledger's
// scope deferral; snoozing jobs, probing when a cooldown ends and
// observe-only rollout belong to its callers. It does not decide which
// responses are throttling responses, and it does not read other vendor
// headers: callers parse those and use DecideDelay.
package retryafter
