package live

import "github.com/callscribe/callscribe/capacity/internal/rediskit"

// The gate's Redis keys share the gate's hash tag, "gate/NAME": its
// tickets, a sorted set of ticket ids scored by expiry (Redis ms), and
// their holders, a hash of ticket id to "org\ncall_id\nadmitted ms".
// Every script below is a NowScript: ARGV[1] is the clock ("" for Redis
// TIME), its own arguments follow.

// luaGateTrim drops the tickets whose expiry has passed (and their
// holders), setting local reclaimed to the holders of those dropped. At
// most Size tickets are ever in the set, so the list is bounded.
const luaGateTrim = `
local reclaimed = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  reclaimed[#reclaimed + 1] = redis.call('HGET', KEYS[2], id) or ''
  redis.call('HDEL', KEYS[2], id)
end
if #reclaimed > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
`

// gateEnterScript: KEYS tickets, holders; ARGV now, ticket id, ticket ms,
// size, holder, keys ms. Trims expired tickets, then adds this one if
// fewer than size are held. Returns {granted 0/1, in use (after), expiry
// ms or 0, holder of each ticket reclaimed...}. Both keys live keys ms
// after their newest ticket was taken (longer than a ticket, so that the
// holder of one never left is there to be logged when it is reclaimed),
// then an idle gate leaves Redis.
var gateEnterScript = rediskit.NowScript(luaGateTrim + `
local n = redis.call('ZCARD', KEYS[1])
local out = {0, n, 0}
if n < tonumber(ARGV[4]) then
  local ttl = tonumber(ARGV[3])
  local exp = now + ttl
  redis.call('ZADD', KEYS[1], exp, ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[5] .. '\n' .. now)
  local keep = tonumber(ARGV[6])
  for _, k in ipairs(KEYS) do
    if redis.call('PTTL', k) < keep then redis.call('PEXPIRE', k, keep) end
  end
  out = {1, n + 1, exp}
end
for _, h in ipairs(reclaimed) do out[#out + 1] = h end
return out
`)

// gateLeaveScript: KEYS tickets, holders; ARGV now, ticket id, org ("":
// any organisation's ticket). Gives the ticket's place back if it is live
// and its holder's organisation is org. Returns {left 0/1, holder ("" when
// not left), now}. A ticket past its expiry is dropped (not left: its
// place was reclaimed); another organisation's is left untouched.
var gateLeaveScript = rediskit.NowScript(`
local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[2]))
local h = redis.call('HGET', KEYS[2], ARGV[2])
if not s or s <= now then
  if s then redis.call('ZREM', KEYS[1], ARGV[2]) end
  if h then redis.call('HDEL', KEYS[2], ARGV[2]) end
  return {0, '', now}
end
h = h or '\n\n0'
if ARGV[3] ~= '' and string.sub(h, 1, #ARGV[3] + 1) ~= ARGV[3] .. '\n' then
  return {0, '', now}
end
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
return {1, h, now}
`)

// gateInUseScript: KEYS tickets; ARGV now. Returns how many tickets are
// live (expiry after now), without trimming.
var gateInUseScript = rediskit.NowScript(`
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`)
