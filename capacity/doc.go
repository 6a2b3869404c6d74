// Package capacity counts speech vendors' concurrency slots platform-wide in
// Redis, so that live calls and post-call batch work share one vendor plan.
//
// Leases: a vendor slot is a lease, a member of a Redis sorted set scored by
// its expiry, taken by one Lua script that trims expired members, counts,
// and adds the lease if below the limit (batch work only up to the limit
// minus a reserve for live traffic), with the time taken from Redis (TIME),
// not from each process. A heartbeat refreshes every lease a process holds
// in one round trip; a lease that expired meanwhile is reported lost. A
// vendor refusal below the limit lowers the effective limit to in-use − 1
// (never raised automatically; SetLimit is the operator's).
//
// Slots and RateLimiter: organisation and campaign caps acquired together
// in one script, bound to calls; calls started per second per organisation.
// Gate: a per-process admission gate in front of per-call resources.
//
// Live calls: ConnectTranscriber takes one transcriber slot per call (a
// fallback with room becomes the call's transcriber; nothing with room:
// connect anyway, flagged over-limit); Voice takes one slot per reply
// (overflow to a fallback voice, or wait up to 1.5 s, with a warning on the
// call's timeline); Dialer reserves a transcriber slot before dialling and
// keeps calls queued, waiting for provider capacity, until one frees.
//
// NewHTTPHandler serves leases and call slots as JSON for live-call runtimes
// in other languages (callscribe serve).
//
// Every key of one script shares a hash tag, so the scripts run on Redis
// Cluster. If Redis is unreachable, capacity fails open: the caller goes
// ahead uncounted, a counter goes up, and a warning is logged at most once a
// minute. Capacity code never returns an error into a call.
//
// It imports no sibling package.
package capacity
