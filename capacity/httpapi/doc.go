// Package httpapi serves capacity over JSON HTTP, for live-call runtimes in
// other languages (`callscribe serve`): vendor leases (acquire, refresh,
// release), call slots (acquire, bind, release, release by call), a call's
// transcriber and a reply's voice by its agent's providers, the dial queue
// shared through Redis (dial, poll, answered, ended), each call's timeline
// (capacity/live), the status of every configured provider, the vendors'
// refusals that teach a lower limit, and each organisation's pool of
// outbound caller IDs (acquire, release, list).
//
// NewHandler returns the http.Handler; its doc lists the routes.
//
// Guarantees: like the library, the API fails open: when Redis is down,
// acquires answer 200 granted and uncounted and releases 204, never 5xx,
// except a caller-ID acquire: a number cannot be invented, so it answers
// 503 with Retry-After at once and the runtime dials with its default. A
// lease or slot object is sent back by the client exactly as it was
// received, and a lease the client claims counted for a provider/kind with
// no configured limit is treated as uncounted. Request bodies must be
// Content-Type application/json exactly (application/jsonp and other
// look-alikes get 415), at most Options.MaxBodyBytes, one object whose
// keys match their fields exactly, case included, with no unknown or
// duplicate key anywhere (internal/strictjson); a client mistake is a 4xx
// naming the field or key by its path. With Options.Token set, every
// request needs that bearer token. GET /v1/status shows an
// organisation's token only its own live calls: the vendor leases and
// auth_failures count every organisation's requests, so only an admin
// token sees them.
//
// What it does not do: it keeps no lease alive for a client (the client
// refreshes its own through /v1/leases/refresh, so the leases of a client
// that dies lapse on their own), does not listen (the caller owns the
// http.Server and its timeouts: a slot acquire may hold its request up to
// SlotWaitMax), and imports no callscribe package but capacity,
// capacity/live and leaf helpers under internal/.
package httpapi
