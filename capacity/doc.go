// Package capacity counts speech vendors' concurrency slots platform-wide in
// Redis, so that live calls and post-call batch work share one vendor plan.
//
// Leases: a vendor slot is a lease, a member of a Redis sorted set scored by
// its expiry, taken by one Lua script that trims expired members, counts,
// and adds the lease if below the limit (batch work only up to the limit
// minus a reserve for live traffic). A Heartbeat refreshes every lease a
// process holds in one round trip; a lease that expired meanwhile is
// reported lost. Acquire records the peak in use per minute (Status).
//
// Limits: a vendor refusal below the limit lowers the effective limit to
// in-use − 1 (ReportRefusal); nothing raises a limit automatically, only the
// operator's SetLimit. Every change is kept as a LimitEvent.
//
// Slots: organisation and campaign caps on concurrent calls, acquired
// together in one script and bound to a call, so that the call's end frees
// them; stale slots are reclaimed lazily. A binding belongs to the slot's
// organisation (its key is the organisation's and the call's), is made only
// for a slot Redis holds live, and lives as long as Redis says the slot
// does; only that organisation can release it. Organisation, campaign, call
// and slot ids are checked (CheckID: 1–IDMaxLen of A-Z a-z 0-9 . _ -), since
// they are parts of Redis keys. A waiting Acquire retries at most every
// RetryIntervalMin. The caps come from SlotsConfig; SetStoredCaps lays
// caps changed at run time (capacity/orgcap keeps them in PostgreSQL)
// over them, swapped atomically, never read from a database in the call's
// path.
//
// Caller IDs: each organisation's pool of outbound caller IDs (CallerIDs),
// the E.164 numbers its calls dial from (CheckNumber). One script takes
// back the numbers busy for StaleAfterDefault (the slots' timeout), then
// takes the free number freed longest ago and marks it busy with a holder
// token; release frees a number only with that token, so a stale holder
// cannot free a number another call now holds. A number cannot be
// invented, so without Redis Acquire does not fail open with a grant: it
// returns ErrCallerIDsUnavailable at once (after at most RedisConfig.AdmitOpTimeout) and the
// caller dials with its default number; Release does nothing and the
// number comes back after the timeout.
//
// Redis: every counter, here and in capacity/live, is built on one Redis
// handle (NewRedis), made once per process: the client, the key prefix,
// the bound of one round trip and the fail-open warnings. A lease's and a
// window's Lane is the ledger's (internal/lane): only the batch lane is
// held back.
//
// Guarantees: time is Redis's, never a process's: every script that needs
// it starts with the one shared "now" prelude (capacity/internal/rediskit),
// which reads Redis TIME. Every key of one script shares a hash tag, so the
// scripts run on Redis Cluster; the one exception, Windows.AcquireWithLease's
// script (a window slot and a vendor lease in one round trip), runs only on
// a single Redis, and on any other client the two are taken in two
// scripts. If Redis is unreachable, capacity fails
// open: the caller goes ahead uncounted, a counter goes up, and a
// warning is logged at most once a minute. Capacity code never returns a
// Redis error into a call (only the caller's own mistakes: an invalid id, a
// slot not held, a call not bound); only the operator calls (SetLimit, Status,
// LimitEvents, LiveCalls, the caller-ID pool's Add, Remove and List) return
// Redis errors, and CallerIDs.Acquire returns ErrCallerIDsUnavailable.
//
// What it does not do: it does not call a vendor or decide what a live call
// does when a provider is full; those rules (a call's transcriber and
// voice, the dialler's queue, call-start rates, the admission gate shared
// in Redis) are in capacity/live, and the JSON HTTP API for runtimes in other
// languages is capacity/httpapi. It imports no sibling package.
package capacity
