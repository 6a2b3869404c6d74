package capacity

import (
	"fmt"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// luaEffective sets local eff: the learned limit, else the operator's,
// else the configured limit, the argument in its second %s. Its first %s
// is the limit hash's key.
const luaEffective = `
local lim = redis.call('HMGET', %s, 'learned', 'set')
local eff = tonumber(lim[1]) or tonumber(lim[2]) or tonumber(%s)
`

// Every script below that reads the clock is a NowScript: ARGV[1] is the
// clock ("" for Redis TIME), its own arguments follow.

// luaLeaseAcquire defines lease_acquire(K, A), the acquire of a lease, and
// acquireScript runs it on KEYS and ARGV. K and A are laid out as KEYS
// and ARGV here: K leases zset, limit hash, peak hash[, owner set];
// A now, lease id, lease ms, configured limit, reserve (lane cap = eff −
// reserve), peak retention ms, keyed ("1": an id already held is granted
// again, its expiry renewed)[, owner share]. Returns {granted, in use,
// effective limit, expiry ms, owner in use, owner quota}; the last two are
// 0 without an owner set.
//
// With an owner set (K[4]), the lease is also counted against its
// owner's quota, ceil(eff × share) and at least 1: the set holds the ids
// of the owner's leases; ids no longer live in the leases zset (released
// or lapsed) are dropped from it first, so the count is exact and the set
// never outgrows the quota by more than the leases since the last acquire.
// The peak hash is written, and its expiry renewed, only when the minute's
// peak rises, which is at least once in every minute with an Acquire: most
// calls only read it.
var luaLeaseAcquire = `
local function lease_acquire(K, A)
` + fmt.Sprintf(luaEffective, "K[2]", "A[4]") + `  redis.call('ZREMRANGEBYSCORE', K[1], '-inf', now)
  local n = redis.call('ZCARD', K[1])
  local granted = 0
  local exp = now + tonumber(A[3])
  if A[7] == '1' and redis.call('ZSCORE', K[1], A[2]) then
    redis.call('ZADD', K[1], 'XX', exp, A[2])
    return {1, n, eff, exp, 0, 0}
  end
  local mine, quota = 0, 0
  if K[4] then
    for _, id in ipairs(redis.call('SMEMBERS', K[4])) do
      local s = tonumber(redis.call('ZSCORE', K[1], id))
      if s and s > now then mine = mine + 1 else redis.call('SREM', K[4], id) end
    end
    quota = math.max(1, math.ceil(eff * tonumber(A[8]) - 1e-9))
    if mine >= quota then return {0, n, eff, 0, mine, quota} end
  end
  if n < eff - tonumber(A[5]) then
    redis.call('ZADD', K[1], exp, A[2])
    n = n + 1
    granted = 1
    if K[4] then
      redis.call('SADD', K[4], A[2])
      mine = mine + 1
    end
  end
  local minute = math.floor(now / 60000)
  local cur = tonumber(redis.call('HGET', K[3], minute))
  if not cur then
    local oldest = math.floor((now - tonumber(A[6])) / 60000)
    for _, f in ipairs(redis.call('HKEYS', K[3])) do
      if tonumber(f) < oldest then redis.call('HDEL', K[3], f) end
    end
  end
  if not cur or n > cur then
    redis.call('HSET', K[3], minute, n)
    redis.call('PEXPIRE', K[3], A[6])
  end
  return {granted, n, eff, exp, mine, quota}
end
`

// acquireScript runs lease_acquire on its own keys and arguments.
var acquireScript = rediskit.NowScript(luaLeaseAcquire + `
return lease_acquire(KEYS, ARGV)
`)

// refreshScript: KEYS leases zset; ARGV now, lease ms, ids...
// Extends each live id; an id gone or expired is lost (and removed).
// Returns {new expiry ms, lost positions (1-based) ...}.
var refreshScript = rediskit.NowScript(`
local exp = now + tonumber(ARGV[2])
local out = {exp}
for i = 3, #ARGV do
  local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if s and s > now then
    redis.call('ZADD', KEYS[1], 'XX', exp, ARGV[i])
  else
    if s then redis.call('ZREM', KEYS[1], ARGV[i]) end
    out[#out + 1] = i - 2
  end
end
return out
`)

// refusalScript: KEYS limit hash, events list, leases zset; ARGV now,
// configured limit, in use at the refusal, floor, events cap, reporter,
// at least counted ("1": in use is raised to the leases the zset holds
// live now). Lowers the learned limit to max(in use − 1, floor) when that
// is below the effective limit. Returns {lowered 0/1, effective before,
// effective after, in use judged by}.
var refusalScript = rediskit.NowScript(fmt.Sprintf(luaEffective, "KEYS[1]", "ARGV[2]") + `
local inuse = tonumber(ARGV[3])
if ARGV[7] == '1' then
  inuse = math.max(inuse, redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf'))
end
local new = math.max(inuse - 1, tonumber(ARGV[4]))
if inuse >= eff or new >= eff then return {0, eff, eff, inuse} end
redis.call('HSET', KEYS[1], 'learned', new)
local ev = {at = now, reason = 'refusal', in_use = inuse, from = eff, to = new}
if ARGV[6] ~= '' then ev.reporter = ARGV[6] end
redis.call('LPUSH', KEYS[2], cjson.encode(ev))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
return {1, eff, new, inuse}
`)

// setLimitScript: KEYS limit hash, events list; ARGV now, configured
// limit, new limit, events cap. Sets the operator's limit and forgets the
// learned one. Returns the effective limit before.
var setLimitScript = rediskit.NowScript(fmt.Sprintf(luaEffective, "KEYS[1]", "ARGV[2]") + `
redis.call('HSET', KEYS[1], 'set', ARGV[3])
redis.call('HDEL', KEYS[1], 'learned')
redis.call('LPUSH', KEYS[2], cjson.encode({at = now, reason = 'set', in_use = -1, from = eff, to = tonumber(ARGV[3])}))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
return eff
`)

// statusScript: KEYS leases zset, limit hash, peak hash; ARGV now.
// Returns {in use, learned or -1, set or -1, minute, peak, ...}.
var statusScript = rediskit.NowScript(`
local out = {redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')}
local lim = redis.call('HMGET', KEYS[2], 'learned', 'set')
out[2] = tonumber(lim[1]) or -1
out[3] = tonumber(lim[2]) or -1
for _, v in ipairs(redis.call('HGETALL', KEYS[3])) do out[#out + 1] = tonumber(v) end
return out
`)
