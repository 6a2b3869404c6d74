// Package vendorhttp is the HTTP shell that callscribe's outbound adapters
// share: the speech-vendor adapters (jobs/stt) and the CRM connectors
// (crm/connector). It holds what does not depend on the vendor: the
// Endpoint (base URL, client, per-exchange timeout, response size limit,
// User-Agent), one Exchange that reads an answer whole or says why there is
// none (network error, timeout, cancellation, dropped connection, a success
// body over the limit), the shape of a status table (exact rows, the
// Retry-After rule of 503, fallbacks by status class), raw headers, plain
// text bodies, a client that never follows redirects (NoRedirects), the
// refusal of plain http to a host that is not loopback (CheckPlainHTTP),
// and the Redactor that removes credentials (internal/scrub)
// from every message that leaves an adapter.
//
// It does not decide what a failure means for the caller: a Verdict says
// retry, throttle or refuse, and each adapter maps it to its own outcome
// (for the speech vendors "permanent", for the CRMs "dead"). It does not
// retry, log, or parse vendor bodies.
//
// Raw header values (RawHeader) are bounded at RawHeaderMaxBytes, with a
// note when cut, and their control characters are escaped.
//
// It is a leaf: it imports the standard library and internal/scrub only.
package vendorhttp
