package capacity

import "github.com/callscribe/callscribe/capacity/internal/rediskit"

// The window scripts share one prelude (luaWindowLoad) that reads the
// configuration from ARGV[2] and the plan limit from ARGV[3], loads the scope's state, trims lapsed
// leases and gone waiters, and defines save() and event(). Their own
// arguments start at ARGV[4].
//
// KEYS: 1 state hash, 2 in-flight zset (holder → expiry), 3 lease meta hash
// (holder → JSON {lane, n, at, epoch}), 4 waiters zset (holder → order), 5
// waiters' due zset (holder → when it will ask again), 6 waiters' expiry
// zset, 7 events list, 8 waiters' River jobs hash (holder → job id), 9
// the immediate waiters' due zset (a copy of their part of 5, so that a
// batch request counts the immediate waiters present with one ZCOUNT
// instead of a ZSCORE per waiter; built once from 5 for a window written
// before it existed, flagged by the state's duei field).
//
// ARGV: 1 now; 2 the configuration as JSON (windowArgs); 3 the plan limit
// (0: none).
const luaWindowLoad = `
local S, INF, META, WAIT, DUE, WEXP, EV, WJOB, DUEI = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local IMMEDIATE = '(' .. 10000000000000 -- waiters' order scores below it are immediate (orderScore)
local cfg = cjson.decode(ARGV[2])
local c_initial, c_start, c_rounds, c_retry, c_retrymax = cfg.initial, cfg.start, cfg.rounds, cfg.retry, cfg.retry_max
local c_strikes, c_share, c_lease, c_hold0 = cfg.strikes, cfg.share, cfg.lease, cfg.hold
local c_minw, c_maxw, c_evcap, c_late = cfg.min_wait, cfg.max_wait, cfg.events, cfg.late
local c_max = tonumber(ARGV[3])

local raw = redis.call('HGETALL', S)
local st = {}
for i = 1, #raw, 2 do st[raw[i]] = raw[i + 1] end
if st.duei ~= '1' then
  redis.call('DEL', DUEI)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', WAIT, '-inf', IMMEDIATE)) do
    local d = redis.call('ZSCORE', DUE, m)
    if d then redis.call('ZADD', DUEI, d, m) end
  end
  redis.call('HSET', S, 'duei', '1')
end
local size = tonumber(st.size)
local target, ceiling, ceiling_at, proven, acks, epoch, hold, phase, retry, strikes, strike_n
local dirty = false
local function event(kind, from, to, reason)
  redis.call('LPUSH', EV, cjson.encode({at = now, kind = kind, from = from, to = to, reason = reason}))
  redis.call('LTRIM', EV, 0, c_evcap - 1)
end
if size then
  target, ceiling, ceiling_at = tonumber(st.target), tonumber(st.ceiling) or 0, tonumber(st.ceiling_at) or 0
  proven, acks, epoch = tonumber(st.proven) or 0, tonumber(st.acks) or 0, tonumber(st.epoch) or 0
  hold, phase = tonumber(st.hold) or c_hold0, st.phase or 'steady'
  retry, strikes, strike_n = tonumber(st.retry) or c_retry, tonumber(st.strikes) or 0, tonumber(st.strike_n) or 0
else
  size, ceiling, ceiling_at, proven, acks, epoch, hold = c_initial, 0, 0, 0, 0, 0, c_hold0
  retry, strikes, strike_n = c_retry, 0, 0
  target = c_start
  if c_max > 0 then target = c_max end
  if target < size then target = size end
  phase = 'slow-start'
  if size >= target then phase = 'steady' end
  dirty = true
  event('open', 0, size, 'new window: slow start from ' .. size .. ' towards ' .. target)
end
if c_max > 0 and size > c_max then
  event('cap', size, c_max, 'plan limit is ' .. c_max)
  size, dirty = c_max, true
end
if c_max > 0 and target > c_max then target, dirty = c_max, true end

local lapsed = redis.call('ZRANGEBYSCORE', INF, '-inf', now)
if #lapsed > 0 then
  for _, m in ipairs(lapsed) do redis.call('HDEL', META, m) end
  redis.call('ZREMRANGEBYSCORE', INF, '-inf', now)
  event('lapsed', size, size, #lapsed .. ' slot(s) lapsed without an answer (holder gone?)')
end
local gone = redis.call('ZRANGEBYSCORE', WEXP, '-inf', now)
if #gone > 0 then
  for _, m in ipairs(gone) do
    redis.call('ZREM', WAIT, m)
    redis.call('ZREM', DUE, m)
    redis.call('ZREM', DUEI, m)
    redis.call('HDEL', WJOB, m)
  end
  redis.call('ZREMRANGEBYSCORE', WEXP, '-inf', now)
end

-- save writes the state's fields that differ from the hash (st, kept in
-- step), and updated_at.
local function save()
  local f = {'size', size, 'target', target, 'ceiling', ceiling, 'ceiling_at', ceiling_at,
    'proven', proven, 'acks', acks, 'epoch', epoch, 'hold', hold, 'phase', phase,
    'retry', retry, 'strikes', strikes, 'strike_n', strike_n}
  local out = {'updated_at', now}
  for i = 1, #f, 2 do
    local v = tostring(f[i + 1])
    if st[f[i]] ~= v then
      out[#out + 1], out[#out + 2], st[f[i]] = f[i], v, v
    end
  end
  redis.call('HSET', S, unpack(out))
end
-- wake calls the first free waiters that are asleep (due later): they are
-- due now, and their River jobs are returned for the caller to wake.
local function wake(free)
  local out = {}
  if free <= 0 then return out end
  local ms = redis.call('ZRANGE', WAIT, 0, free - 1)
  -- their due times in one call (ZMSCORE), a thousand at a time
  local ds = {}
  for i = 1, #ms, 1000 do
    local part = redis.call('ZMSCORE', DUE, unpack(ms, i, math.min(i + 999, #ms)))
    for k = 1, #part do ds[i + k - 1] = part[k] end
  end
  for i, m in ipairs(ms) do
    local d = tonumber(ds[i])
    if d and d > now + c_late then
      redis.call('ZADD', DUE, now, m)
      redis.call('ZADD', DUEI, 'XX', now, m)
      redis.call('ZADD', WEXP, now + 5000 + c_late * 8, m)
      local j = tonumber(redis.call('HGET', WJOB, m))
      if j then out[#out + 1] = j end
    end
  end
  return out
end
local function lanecap(lane)
  if lane == 1 and c_share > 0 then
    return math.max(1, size - math.ceil(size * c_share / 1000))
  end
  return size
end
`

// windowAcquiresScript gives back the scope's releases queued in the
// calling process, then serves one or more acquires of the scope in the
// order given, each as if it ran alone just after the one before, at one
// instant: the acquires that arrived in a process while another of the
// scope was on its way to Redis, gathered into one round trip
// (acquireGather). KEYS 1–9 the window's, then three for each acquire
// that takes a vendor lease too (leases zset, limit hash, peak hash).
// ARGV 1–3 as every window script's, from ARGV 4 the releases
// (luaWindowReleases), then the acquires' count and thirteen arguments
// each: holder, lane (0 immediate, 1 batch), order score, not before ms
// (0: none), probe (1: the scope's single probe after a cooldown, granted
// whatever the window), the holder's River job (0: none; woken when a
// slot frees), lease (1: take a lease when the window grants), then the
// lease's acquireScript ARGV 2–7 (lease id, lease ms, configured limit,
// reserve, peak retention ms, keyed; empty without a lease). Returns the
// releases' answers, then for each acquire {lease granted (-1: not asked:
// no lease, or the window refused), in use, effective limit, expiry ms,
// granted, in flight, size, rank, wait ms, target, jobs to wake n, the n
// jobs}. A lease refused leaves the window slot held: the caller gives it
// back, as it would after two scripts.
var windowAcquiresScript = rediskit.NowScript(luaWindowLoad + luaWindowRelease + luaWindowAcquire + luaLeaseAcquire + `
local out = window_releases(4)
local from = 5 + 4 * out[1]
local key = 10
for i = 0, tonumber(ARGV[from]) - 1 do
  local a = from + 1 + i * 13
  local w = window_acquire(ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 4] == '1', tonumber(ARGV[a + 5]))
  local l = {-1, 0, 0, 0}
  if ARGV[a + 6] == '1' then
    if w[1] == 1 then
      l = lease_acquire({KEYS[key], KEYS[key + 1], KEYS[key + 2]}, {ARGV[1], ARGV[a + 7], ARGV[a + 8], ARGV[a + 9], ARGV[a + 10], ARGV[a + 11], ARGV[a + 12]})
    end
    key = key + 3
  end
  for k = 1, 4 do out[#out + 1] = l[k] end
  for k = 1, 6 do out[#out + 1] = w[k] end
  out[#out + 1] = #w - 6
  for k = 7, #w do out[#out + 1] = w[k] end
end
return out
`)

// luaWindowAcquire defines, after luaWindowLoad, window_acquire(holder,
// lane, order, nb, probe, job), one acquire of windowAcquiresScript. A
// holder already in flight is granted again (its slot refreshed).
// Otherwise the holder joins the waiters and is granted when the scope is
// open and its lane has a free slot; a batch request also needs more free
// slots than immediate waiters present (due now, not late). Within a lane
// the first to ask is served: the order of the line is kept by when each
// is told to come back and by who is woken when a slot frees. Returns
// {granted, in flight, size, rank, wait ms, target, jobs to wake...}: a
// grant that leaves slots free wakes the next waiters.
const luaWindowAcquire = `
local function window_acquire(holder, lane, order, nb, probe, job)
  local n = redis.call('ZCARD', INF)
  if redis.call('ZSCORE', INF, holder) then
    redis.call('ZADD', INF, 'XX', now + c_lease, holder)
    save()
    return {1, n, size, 0, 0, target}
  end
  local cap = lanecap(lane)
  local free = cap - n
  -- A probe, or an immediate request with a free slot, is granted whatever
  -- the line (its place in it would change nothing): it leaves the line if
  -- it was in it (a waiter is in the due, expiry and job sets only while it
  -- is in the line). A request with a NotBefore (nb > 0) is one the scope
  -- refused: it only takes its place in the line, even when Redis's clock
  -- is already past nb (a slot granted to it would be held by a job that
  -- sleeps).
  local granted = probe or (lane ~= 1 and nb == 0 and free > 0)
  local r = 0
  if not granted then
    redis.call('ZADD', WAIT, order, holder)
    if order >= 10000000000000 then redis.call('ZREM', DUEI, holder) end -- asked as immediate before, maybe
    r = redis.call('ZRANK', WAIT, holder)
  end
  local present = 0
  if r > 0 and lane == 1 then
    -- Every waiter has its due time (written with it below), so the
    -- immediate ones present are those due within the lateness allowed.
    present = redis.call('ZCOUNT', DUEI, now - c_late * 8, now + c_late)
  end
  if granted or (nb == 0 and free > 0 and present < free) then
    if redis.call('ZREM', WAIT, holder) == 1 then
      redis.call('ZREM', DUE, holder)
      redis.call('ZREM', DUEI, holder)
      redis.call('ZREM', WEXP, holder)
      redis.call('HDEL', WJOB, holder)
    end
    redis.call('ZADD', INF, now + c_lease, holder)
    redis.call('HSET', META, holder, cjson.encode({lane = lane, n = n + 1, at = now, epoch = epoch}))
    save()
    local out = {1, n + 1, size, 0, 0, target}
    if nb <= now then
      for _, j in ipairs(wake(size - n - 1)) do out[#out + 1] = j end
    end
    return out
  end
  if job and job > 0 then redis.call('HSET', WJOB, holder, job) end
  local wait
  local slots = math.max(1, cap)
  if nb > 0 then
    local offset = math.floor(r * hold / math.max(1, target))
    wait = math.max(nb - now, 0) + math.min(offset, c_maxw)
    if nb <= now then wait = math.max(c_minw, wait) end
  else
    local pos = math.max(1, r - math.max(free, 0) + 1)
    wait = math.ceil(pos * hold / slots)
    wait = math.max(c_minw, math.min(wait, c_maxw))
  end
  redis.call('ZADD', DUE, now + wait, holder)
  if order < 10000000000000 then redis.call('ZADD', DUEI, now + wait, holder) end
  redis.call('ZADD', WEXP, now + wait + math.max(wait, 5000) + c_late * 8, holder)
  if dirty then save() end
  return {0, n, size, r, wait, target}
end
`

// windowReleaseScript gives back the releases from ARGV 4
// (luaWindowReleases) and returns their answers.
var windowReleaseScript = rediskit.NowScript(luaWindowLoad + luaWindowRelease + `
return window_releases(4)
`)

// luaWindowRelease defines, after luaWindowLoad, window_release(holder,
// outcome, reason, at): frees holder's slot and adapts the window to the
// outcome (0 neutral, 1 success, 2 overload, 3 concurrency refusal;
// reason is recorded with a shrink), at is when the answer came (Unix
// ms, at most now: a release queued in its process runs later than it
// happened), which the hold time is measured to. Returns released (0/1),
// size before, size after and the River jobs of the first waiters asleep,
// one per free slot, called now. And window_releases(from), the releases
// a script is given: ARGV[from] is their count, then four arguments each
// (holder, outcome, reason, age: how many ms before now it happened), run
// in order. It returns {count, then per release: released, size before,
// size after, jobs to wake n, the n jobs}.
const luaWindowRelease = `
local function window_release(holder, outcome, reason, at)
  local before = size
  local metaraw = redis.call('HGET', META, holder)
  local had = redis.call('ZREM', INF, holder)
  redis.call('HDEL', META, holder)
  if had == 0 or not metaraw then
    if dirty then save() end
    return 0, before, size, {}
  end
  local m = cjson.decode(metaraw)
  local n = tonumber(m.n)
  local current = tonumber(m.epoch) == epoch
  if outcome == 1 then
    hold = math.floor(hold * 0.8 + math.max(0, at - tonumber(m.at)) * 0.2)
    if n > proven then proven = n end
    if strike_n > 0 and n >= strike_n then strikes, strike_n = 0, 0 end
    if ceiling > 0 and n >= ceiling then ceiling, ceiling_at, retry = 0, 0, c_retry end
    if current then
      if size < target then
        size = size + 1
        if size >= target then
          phase = 'steady'
          event('grow', before, size, 'slow start back to ' .. size)
        else
          phase = 'slow-start'
        end
      elseif n >= size or redis.call('ZCARD', INF) + 1 >= size then
        acks = acks + 1
        if acks >= size * c_rounds then
          acks = 0
          local cand = size + 1
          if (c_max > 0 and cand > c_max) or (ceiling > 0 and cand >= ceiling and now - ceiling_at < retry) then
            -- at the plan limit, or a size that drew an overload is not tried again yet
          else
            size, target = cand, cand
            event('grow', before, size, 'cautious growth after ' .. c_rounds .. ' full rounds without overload')
          end
        end
      end
    end
  elseif outcome == 2 and not current then
    -- a throttle answering a request sent before the latest cooldown: that
    -- cooldown already restarted the window, so it is no news about its size
    event('overload', before, size, reason .. ' to a request sent before the cooldown: no news about the size')
  elseif outcome == 2 or outcome == 3 then
    local shrink = false
    if n > 1 then
      if outcome == 3 then
        shrink = true
      else
        strikes = strikes + 1
        if strike_n == 0 or n < strike_n then strike_n = n end
        shrink = strikes >= c_strikes
      end
    end
    if shrink then
      acks = 0
      local to = math.max(1, n - 1)
      if to < size then size = to end
      if to < target then target = to end
      if ceiling == n then retry = math.min(retry * 2, c_retrymax) else retry = c_retry end
      ceiling, ceiling_at, strikes, strike_n = n, now, 0, 0
      if proven >= n then proven = n - 1 end
      if phase ~= 'probe' then phase = 'steady' end
      event('shrink', before, size, reason .. ' at ' .. n .. ' in flight; ' .. n .. ' not tried again for ' .. math.floor(retry / 1000) .. 's')
    elseif n > 1 then
      event('overload', before, size, reason .. ' at ' .. n .. ' in flight: size kept (' .. strikes .. ' of ' .. c_strikes .. ' in a row before it shrinks)')
    end
  end
  save()
  return 1, before, size, wake(size - redis.call('ZCARD', INF))
end
local function window_releases(from)
  local k = tonumber(ARGV[from]) or 0
  local out = {k}
  for i = 0, k - 1 do
    local a = from + 1 + i * 4
    local released, before, after, jobs = window_release(ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], now - tonumber(ARGV[a + 3]))
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = released, before, after, #jobs
    for _, j in ipairs(jobs) do out[#out + 1] = j end
  end
  return out
end
`

// windowCooldownScript: ARGV 4 reason. A cooldown began: the window
// restarts from a single probe and grows back by slow start to the size it
// had; answers to requests sent before it do not grow it.
// Returns {size before, target}.
var windowCooldownScript = rediskit.NowScript(luaWindowLoad + `
local before = size
if phase ~= 'probe' or size > 1 then
  if before > target then target = before end
  size, epoch, phase = 1, epoch + 1, 'probe'
  event('cooldown', before, 1, ARGV[4] .. ': restart from the probe, slow start back to ' .. target)
end
save()
return {before, target}
`)

// windowRefreshScript: ARGV 4 holder, 5 extra ms. Extends a held slot
// (accepted work being processed); returns 1 when held.
var windowRefreshScript = rediskit.NowScript(luaWindowLoad + `
local s = redis.call('ZSCORE', INF, ARGV[4])
if dirty then save() end
if not s then return 0 end
redis.call('ZADD', INF, 'XX', now + c_lease + tonumber(ARGV[5]), ARGV[4])
return 1
`)

// windowStatusScript: the state after trimming. Returns {size, target,
// ceiling, ceiling_at, proven, in flight, waiting, hold, phase, updated}.
var windowStatusScript = rediskit.NowScript(luaWindowLoad + `
if dirty then save() end
return {size, target, ceiling, ceiling_at, proven, redis.call('ZCARD', INF), redis.call('ZCARD', WAIT), hold, phase, tonumber(st.updated_at) or now}
`)
