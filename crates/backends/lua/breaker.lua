-- PolyGateway circuit breaker for one source, atomically (SPEC §7); the same transitions as
-- the in-memory breaker, on Redis TIME, so exactly one process gets the half-open probe.
-- (breaker_core.lua is prepended.)
--
-- KEYS: 1 B, the breaker HASH.
-- ARGV: 1 op ("acquire" | "record" | "state"), 2 probe lease ms, then for record:
--       3 outcome ("success" | "neutral" | "transient" | "dead" | "cancelled"), 4 was probe
--       (1/0), 5 failures to open, 6 open ms, 7 max open ms, 8 dead open ms.
-- acquire -> {0} allow | {1, wait ms} reject | {2} reject, probe out | {3} probe
-- record  -> 1 when this report opened the breaker, else 0
-- state   -> {0} closed | {1, remaining ms} open | {2} half-open

local B = KEYS[1]
local op, lease = ARGV[1], tonumber(ARGV[2])
local now = redis_now()

if op == 'acquire' then
  local decision, wait = breaker_acquire(B, now, lease)
  if decision == 1 then return {1, wait} end
  return {decision}
elseif op == 'state' then
  local open_until = tonumber(redis.call('HGET', B, 'open_until') or '0')
  if open_until == 0 then return {0} end
  if now < open_until then return {1, open_until - now} end
  return {2}
elseif op == 'record' then
  return breaker_record(B, now, lease, ARGV[3], ARGV[4] == '1', tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8]))
end
return redis.error_reply('unknown op ' .. tostring(op))
