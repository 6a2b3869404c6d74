package live

import (
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// The dial queue's scripts. Its keys share the hash tag "dial": the queue
// (a sorted set of call ids scored by Redis time in µs), each call's hash
// (state, call, queued_at, waiting_for, reservation), and the re-check
// lock with its "again" flag.

// dialEnqueueScript: KEYS queue, call hash; ARGV now, call id, call JSON,
// state TTL ms. Queues the call at the back (scored by Redis time in µs)
// unless it is already known: {1, queued_at ms} new, {0, queued_at ms}
// known.
var dialEnqueueScript = rediskit.NowScript(`
local known = redis.call('HGET', KEYS[2], 'queued_at')
if known then return {0, tonumber(known)} end
redis.call('HSET', KEYS[2], 'state', 'queued', 'call', ARGV[3], 'queued_at', now, 'waiting_for', 'capacity check')
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[1], 'NX', now_us, ARGV[2])
return {1, now}
`)

// dialReserveScript: KEYS queue, call hash; ARGV call id, reservation
// JSON, state TTL ms. ZREM wins: only the one caller that removes the call
// from the queue while it is still queued reserves it (1); any other gets
// 0 and gives its slot back. It is idempotent: run again with the same
// reservation after it went in (a retry whose first reply was lost), it
// answers 1 again while the call holds that reservation (reserved or
// answered since), so a lost reply is never taken for a lost race.
var dialReserveScript = redis.NewScript(`
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  if redis.call('HGET', KEYS[2], 'reservation') == ARGV[2] then return 1 end
  return 0
end
if redis.call('HGET', KEYS[2], 'state') ~= 'queued' then return 0 end
redis.call('HSET', KEYS[2], 'state', 'reserved', 'reservation', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`)

// dialWaitingScript: KEYS call hash; ARGV waiting_for. Sets what a queued
// call waits for; 1 when that changed.
var dialWaitingScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then return 0 end
if redis.call('HGET', KEYS[1], 'waiting_for') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'waiting_for', ARGV[1])
return 1
`)

// dialAnswerScript: KEYS call hash; ARGV state TTL ms. A reserved (or
// already answered) call becomes answered: {state before, reservation}.
// Otherwise {state or ""}.
var dialAnswerScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if st ~= 'reserved' and st ~= 'answered' then return {st or ''} end
redis.call('HSET', KEYS[1], 'state', 'answered')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {st, redis.call('HGET', KEYS[1], 'reservation')}
`)

// dialEndScript: KEYS queue, call hash; ARGV call id. Forgets the call:
// {state or "", reservation or ""}.
var dialEndScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[2], 'state', 'reservation')
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return {v[1] or '', v[2] or ''}
`)

// dialLockScript: KEYS lock, again; ARGV token, ttl ms. Takes the re-check
// lock (1), or, when another process holds it, asks it to go again (0).
var dialLockScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 0
`)

// dialUnlockScript: KEYS lock, again; ARGV token, ttl ms. At the end of a
// pass: if another process asked meanwhile, keep the lock and go again
// (1); else release it (0).
var dialUnlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
redis.call('DEL', KEYS[1])
return 0
`)
