-- The circuit breaker's transitions (SPEC §7), shared by breaker.lua and admission.lua (which
-- checks the breaker and reserves in one step). Prepended to each script by the Rust side.
--
-- The breaker of a source is one HASH: cf (consecutive transient failures), trips,
-- open_until (ms, 0 = closed), probe_since (ms, 0 = none).

-- -> 0 allow | 1, wait ms: open | 2: half-open, the probe is out | 3: this caller is the probe
local function breaker_acquire(B, now, lease)
  local open_until = tonumber(redis.call('HGET', B, 'open_until') or '0')
  if open_until == 0 then return 0, -1 end
  if now < open_until then return 1, open_until - now end
  local probe_since = tonumber(redis.call('HGET', B, 'probe_since') or '0')
  if probe_since > 0 and now - probe_since < lease then return 2, -1 end
  redis.call('HSET', B, 'probe_since', now)
  return 3, -1
end

-- outcome: "success" | "neutral" | "transient" | "dead" | "cancelled" -> 1 when it opened the breaker
local function breaker_record(B, now, lease, outcome, was_probe, failures, open_ms, max_ms, dead_ms)
  local open_until = tonumber(redis.call('HGET', B, 'open_until') or '0')
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
    -- A success closes a probed breaker and resets the count of a closed one.
    if was_probe or (open_until == 0 and redis.call('HEXISTS', B, 'cf') == 1) then redis.call('DEL', B) end
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

local function redis_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
