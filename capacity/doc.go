// Package capacity counts speech vendors' concurrency slots platform-wide in
// Redis, so that live calls and post-call batch work share one vendor plan.
//
// A slot is a lease: a member of a Redis sorted set scored by its expiry,
// taken by one Lua script that trims expired members, counts, and adds the
// lease if below the limit, with the time taken from Redis (TIME), not from
// each process. Every key of one script shares a hash tag, so the scripts
// run on Redis Cluster. If Redis is unreachable, capacity fails open: the
// caller goes ahead uncounted, a counter goes up, and a warning is logged at
// most once a minute. Capacity code never returns an error into a call.
//
// It imports no sibling package.
package capacity
