-- PolyGateway admission for one source, atomically (SPEC §6, §17). (breaker_core.lua is
-- prepended.)
--
-- KEYS: 1 W window ZSET (permit id -> granted ms), 2 T tokens HASH (id -> tokens in the
--       window), 3 M meta HASH ("sum" = tokens in the window), 4 C concurrency ZSET
--       (id -> lease end ms, while not released), 5 O outstanding HASH (id -> lease end ms,
--       until settled and released), 6 X settled HASH (id -> 1), 7 B the source's breaker
--       HASH (same hash tag), for the guarded forms.
-- ARGV: 1 op ("reserve" | "settle" | "usage"), 2 id, then per op:
--   reserve: 3 tokens, 4 tpm (-1 none), 5 rpm (-1 none), 6 max concurrency (-1 none),
--            7 lease ms, 8 age-out ms (the window plus the arrival guard),
--            [9 probe lease ms: guarded — pass the breaker first, in the same step]
--            -> {1, tokens, probe (0/1)} granted
--             | {0, reason (1 tpm, 2 rpm, 3 concurrency), wait ms (-1 unknown)} refused
--             | {2, 1 open | 2 probe out, wait ms (-1 unknown)} the breaker said no
--   settle:  3 actual tokens (-1 = release only), 4 release (1/0), 5 age-out ms,
--            [6 outcome, 7 was probe, 8 failures, 9 open ms, 10 max open ms, 11 dead ms,
--             12 probe lease: also report to the breaker, in the same step]
--            -> {done (1/0), breaker opened (1/0)}
--   usage:   3 age-out ms -> {tokens in window, requests in window, in flight}
-- The clock is Redis TIME, so every process sees the same windows. All keys share one hash
-- tag (the source), so the script runs on Redis Cluster.

local W, T, M, C, O, X, B = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local op, id = ARGV[1], ARGV[2]
local now = redis_now()
local BATCH = 500

local function prune(age_out)
  local cutoff = now - age_out
  while true do
    local old = redis.call('ZRANGEBYSCORE', W, '-inf', cutoff, 'LIMIT', 0, BATCH)
    if #old == 0 then break end
    local tokens = redis.call('HMGET', T, unpack(old))
    local freed = 0
    for _, v in ipairs(tokens) do
      if v then freed = freed + tonumber(v) end
    end
    -- `0 - freed`, not `-freed`: Lua's -0 is sent as "-0", which HINCRBY refuses.
    if freed ~= 0 then redis.call('HINCRBY', M, 'sum', 0 - freed) end
    redis.call('HDEL', T, unpack(old))
    redis.call('ZREM', W, unpack(old))
  end
  -- Leases that ran out: the slot comes back; the tokens stay until they age out.
  while true do
    local expired = redis.call('ZRANGEBYSCORE', C, '-inf', now, 'LIMIT', 0, BATCH)
    if #expired == 0 then break end
    redis.call('ZREM', C, unpack(expired))
    redis.call('HDEL', O, unpack(expired))
    redis.call('HDEL', X, unpack(expired))
  end
end

-- Keep the keys while anything in them matters: the window, and the longest lease still
-- running. Never shorten a lifetime another call set.
local function keep(age_out)
  local ttl = age_out + 60000
  local last = redis.call('ZRANGE', C, -1, -1, 'WITHSCORES')
  if last[2] then ttl = math.max(ttl, tonumber(last[2]) - now + 60000) end
  -- The six keys are always extended together, so the window's lifetime stands for all.
  if redis.call('PTTL', W) < ttl then
    for i = 1, 6 do redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end

if op == 'reserve' then
  local tokens, tpm, rpm, maxc = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local lease, age_out = tonumber(ARGV[7]), tonumber(ARGV[8])
  prune(age_out)
  if redis.call('HEXISTS', O, id) == 1 then
    -- A re-sent reserve: answer as before, change nothing.
    return {1, tonumber(redis.call('HGET', T, id) or tokens), 0}
  end
  local probe = 0
  if ARGV[9] then
    local decision, wait = breaker_acquire(B, now, tonumber(ARGV[9]))
    if decision == 1 or decision == 2 then return {2, decision, wait} end
    if decision == 3 then
      probe = 1
      -- The probe belongs to this permit: its settlement (or its release when the caller gave
      -- up before the answer arrived) gives it back, and nobody else's can.
      redis.call('HSET', B, 'probe_id', id)
    end
  end
  -- A refusal below gives the probe slot back: a refused reserve holds nothing.
  local function refuse(reason, wait)
    if probe == 1 then
      redis.call('HSET', B, 'probe_since', 0)
      redis.call('HDEL', B, 'probe_id')
    end
    return {0, reason, wait}
  end
  if maxc >= 0 and redis.call('ZCARD', C) >= maxc then
    return refuse(3, -1)
  end
  local count = redis.call('ZCARD', W)
  if rpm >= 0 and count >= rpm then
    local e = redis.call('ZRANGE', W, count - rpm, count - rpm, 'WITHSCORES')
    return refuse(2, tonumber(e[2]) + age_out - now)
  end
  local sum = tonumber(redis.call('HGET', M, 'sum') or '0')
  if tpm >= 0 and sum + tokens > tpm then
    local wait = -1
    local offset = 0
    while wait < 0 do
      local e = redis.call('ZRANGE', W, offset, offset + BATCH - 1, 'WITHSCORES')
      if #e == 0 then break end
      for i = 1, #e, 2 do
        sum = sum - tonumber(redis.call('HGET', T, e[i]) or '0')
        if sum + tokens <= tpm then
          wait = tonumber(e[i + 1]) + age_out - now
          break
        end
      end
      offset = offset + BATCH
    end
    return refuse(1, wait)
  end
  redis.call('ZADD', W, now, id)
  redis.call('HSET', T, id, tokens)
  redis.call('HINCRBY', M, 'sum', tokens)
  redis.call('ZADD', C, now + lease, id)
  redis.call('HSET', O, id, now + lease)
  keep(age_out)
  return {1, tokens, probe}
elseif op == 'settle' then
  local actual, release, age_out = tonumber(ARGV[3]), ARGV[4] == '1', tonumber(ARGV[5])
  prune(age_out)
  if redis.call('HEXISTS', O, id) == 0 then
    -- Never granted, already finished, or its lease ran out: nothing to do. Checked before the
    -- breaker report, so a settlement sent twice reports once.
    return {0, 0}
  end
  local opened = 0
  local probe_owner = redis.call('HGET', B, 'probe_id') == id
  if ARGV[6] then
    opened = breaker_record(B, now, tonumber(ARGV[12]), ARGV[6], ARGV[7] == '1', tonumber(ARGV[8]),
      tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]))
  elseif probe_owner then
    -- The permit held the probe and ends without a report: its caller gave up before the
    -- answer. The probe slot goes back.
    redis.call('HSET', B, 'probe_since', 0)
  end
  if probe_owner and redis.call('EXISTS', B) == 1 then redis.call('HDEL', B, 'probe_id') end
  if actual >= 0 and redis.call('HEXISTS', X, id) == 0 then
    redis.call('HSET', X, id, 1)
    local old = redis.call('HGET', T, id)
    if old then
      redis.call('HSET', T, id, actual)
      redis.call('HINCRBY', M, 'sum', actual - tonumber(old))
    end
  end
  if release then
    redis.call('ZREM', C, id)
  end
  if redis.call('HEXISTS', X, id) == 1 and not redis.call('ZSCORE', C, id) then
    redis.call('HDEL', O, id)
    redis.call('HDEL', X, id)
  end
  keep(age_out)
  return {1, opened}
elseif op == 'usage' then
  prune(tonumber(ARGV[3]))
  return {tonumber(redis.call('HGET', M, 'sum') or '0'), redis.call('ZCARD', W), redis.call('ZCARD', C)}
end
return redis.error_reply('unknown op ' .. tostring(op))
