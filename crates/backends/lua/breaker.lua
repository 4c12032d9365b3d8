-- PolyGateway circuit breaker for one source, atomically (SPEC §7); the same transitions as
-- the in-memory breaker, on Redis TIME, so exactly one process gets the half-open probe.
--
-- KEYS: 1 B HASH: cf (consecutive transient failures), trips, open_until (ms, 0 = closed),
--       probe_since (ms, 0 = none).
-- ARGV: 1 op ("acquire" | "record" | "state"), 2 probe lease ms, then for record:
--       3 outcome ("success" | "neutral" | "transient" | "dead" | "cancelled"), 4 was probe (1/0),
--       5 failures to open, 6 open ms, 7 max open ms, 8 dead open ms.
-- acquire -> {0} allow | {1, wait ms} reject | {2} reject, probe out | {3} probe
-- record  -> 1 when this report opened the breaker, else 0
-- state   -> {0} closed | {1, remaining ms} open | {2} half-open

local B = KEYS[1]
local op, lease = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local open_until = tonumber(redis.call('HGET', B, 'open_until') or '0')
local probe_since = tonumber(redis.call('HGET', B, 'probe_since') or '0')

if op == 'acquire' then
  if open_until == 0 then return {0} end
  if now < open_until then return {1, open_until - now} end
  if probe_since > 0 and now - probe_since < lease then return {2} end
  redis.call('HSET', B, 'probe_since', now)
  return {3}
elseif op == 'state' then
  if open_until == 0 then return {0} end
  if now < open_until then return {1, open_until - now} end
  return {2}
elseif op == 'record' then
  local outcome, was_probe = ARGV[3], ARGV[4] == '1'
  local failures, open_ms, max_ms, dead_ms = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  local trips = tonumber(redis.call('HGET', B, 'trips') or '0')
  local function open(dead)
    local ms = dead_ms
    if not dead then
      ms = math.min(open_ms * (2 ^ math.min(trips, 16)), math.max(max_ms, open_ms))
    end
    redis.call('HSET', B, 'trips', trips + 1, 'open_until', now + ms, 'probe_since', 0, 'cf', 0)
    return 1
  end
  local opened = 0
  if outcome == 'cancelled' then
    if was_probe then redis.call('HSET', B, 'probe_since', 0) end
  elseif outcome == 'success' then
    if was_probe or open_until == 0 then redis.call('DEL', B) end
  elseif outcome == 'neutral' then
    -- The request's or the result's fault: not the source's; a probe that got an answer closes.
    if was_probe then redis.call('DEL', B) end
  elseif outcome == 'dead' then
    opened = open(true)
  elseif outcome == 'transient' then
    if was_probe then
      opened = open(false)
    elseif open_until == 0 then
      local cf = redis.call('HINCRBY', B, 'cf', 1)
      if cf >= failures then opened = open(false) end
    end
  end
  if redis.call('EXISTS', B) == 1 then redis.call('PEXPIRE', B, math.max(dead_ms, max_ms) * 2 + lease) end
  return opened
end
return redis.error_reply('unknown op ' .. tostring(op))
