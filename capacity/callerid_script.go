package capacity

import (
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
)

// The caller-ID pool's keys, all of one organisation (hash tag org):
//
//	KEYS[1] pool: sorted set number → 0 (free) or the Unix ms it was taken
//	KEYS[2] free: sorted set of the free numbers → the Unix ms each was last
//	        freed (0: never used), so the least recently used is first
//	KEYS[3] hold: hash number → the holder's token
//	KEYS[4] call: hash number → the holder's call id
//
// A number is in pool for as long as it belongs to the pool; it is in free
// exactly when its pool score is 0, and in hold and call exactly when its
// pool score is above 0.

// luaCallerIDReclaim frees every number busy since at or before now − stale
// (ARGV[2] is stale in ms), as if its holder had released it now, and sets
// reclaimed to how many it freed.
const luaCallerIDReclaim = `
local stale = tonumber(ARGV[2])
local reclaimed = 0
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '(0', now - stale)
for _, n in ipairs(old) do
  redis.call('ZADD', KEYS[1], 0, n)
  redis.call('ZADD', KEYS[2], now, n)
  redis.call('HDEL', KEYS[3], n)
  redis.call('HDEL', KEYS[4], n)
  reclaimed = reclaimed + 1
end
`

// callerIDAcquireScript: KEYS pool, free, hold, call; ARGV now, stale ms,
// token, call id. Reclaims stale numbers, then takes the free number freed
// longest ago (ties: the lowest number, byte-wise) and marks it busy since
// now for token and call id. Returns {number, now, busy, total, reclaimed},
// number "" when none is free.
var callerIDAcquireScript = rediskit.NowScript(luaCallerIDReclaim + `
local total = redis.call('ZCARD', KEYS[1])
local first = redis.call('ZRANGE', KEYS[2], 0, 0)
if #first == 0 then
  return {'', now, total - redis.call('ZCARD', KEYS[2]), total, reclaimed}
end
local n = first[1]
redis.call('ZREM', KEYS[2], n)
redis.call('ZADD', KEYS[1], now, n)
redis.call('HSET', KEYS[3], n, ARGV[3])
redis.call('HSET', KEYS[4], n, ARGV[4])
return {n, now, total - redis.call('ZCARD', KEYS[2]), total, reclaimed}
`)

// callerIDReleaseScript: KEYS pool, free, hold, call; ARGV now, number,
// token. Frees the number only while token holds it. Returns 1 if it freed
// it, 0 otherwise (released already, reclaimed, removed, or another
// holder's).
var callerIDReleaseScript = rediskit.NowScript(`
if redis.call('HGET', KEYS[3], ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], 0, ARGV[2])
  redis.call('ZADD', KEYS[2], now, ARGV[2])
end
return 1
`)

// callerIDAddScript: KEYS pool, free; ARGV numbers. Adds each number not
// yet in the pool, free and never used. Returns how many it added.
var callerIDAddScript = redis.NewScript(`
local added = 0
for _, n in ipairs(ARGV) do
  if not redis.call('ZSCORE', KEYS[1], n) then
    redis.call('ZADD', KEYS[1], 0, n)
    redis.call('ZADD', KEYS[2], 0, n)
    added = added + 1
  end
end
return added
`)

// callerIDRemoveScript: KEYS pool, free, hold, call; ARGV now, stale ms,
// force ("1" or ""), numbers from ARGV[4]. Unless force, refuses the whole
// removal when any number is busy and not stale, returning {0, busy
// numbers...}; otherwise removes every number (a holder's later release
// then frees nothing) and returns {1, removed count}.
var callerIDRemoveScript = rediskit.NowScript(`
local stale = tonumber(ARGV[2])
if ARGV[3] ~= '1' then
  local busy = {0}
  for i = 4, #ARGV do
    local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
    if s and s > 0 and s > now - stale then table.insert(busy, ARGV[i]) end
  end
  if #busy > 1 then return busy end
end
local removed = 0
for i = 4, #ARGV do
  removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
  redis.call('HDEL', KEYS[4], ARGV[i])
end
return {1, removed}
`)

// callerIDListScript: KEYS pool, call; ARGV now. Returns {now, number,
// busy since ms, call id, ...} for every number, lowest number first.
var callerIDListScript = rediskit.NowScript(`
local out = {now}
local pool = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local byNumber = {}
for i = 1, #pool, 2 do table.insert(byNumber, {pool[i], pool[i + 1]}) end
table.sort(byNumber, function(a, b) return a[1] < b[1] end)
for _, e in ipairs(byNumber) do
  local call = ''
  if tonumber(e[2]) > 0 then call = redis.call('HGET', KEYS[2], e[1]) or '' end
  table.insert(out, e[1])
  table.insert(out, e[2])
  table.insert(out, call)
end
return out
`)
