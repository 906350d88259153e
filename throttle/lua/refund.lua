-- refund.lua: give back a cancelled reservation's tokens, at most once.
--
-- KEYS[i]      bucket key i, as reserved (i = 1..k)
-- KEYS[k+1]    the reservation's marker key (same hash slot); its presence means "already refunded"
-- ARGV[1]      now in microseconds, or "" to read Redis TIME
-- ARGV[2]      the reservation's slot: the server time (µs) at which it may act
-- ARGV[3i]     bucket i: the TAT the reservation left (from reserve.lua's reply)
-- ARGV[3i+1]   bucket i: T, microseconds per token
-- ARGV[3i+2]   bucket i: n, tokens reserved
--
-- Reply: 1 if the refund was processed now (what it gives back, if anything, is below),
-- 0 if the slot has passed or it was processed before.
-- Only what no later reservation stands on and has not refilled yet comes back:
-- min(cost - (TAT now - TAT reserved), TAT reserved - now), nothing if that is not
-- positive. (In a multi-bucket reservation the slot follows the slowest bucket, so
-- a faster one may have refilled past this reservation long before the slot.)
-- A TAT at or before now means a full bucket (the key is deleted).

local slot = tonumber(ARGV[2])
-- All quantities are integer microseconds or tokens, so the arithmetic is exact.
if now >= slot then return 0 end

local k = #KEYS - 1
local ttl = math.ceil((slot - now) / 1000) + 1000
if not redis.call("SET", KEYS[k + 1], "1", "NX", "PX", ttl) then return 0 end

for i = 1, k do
  local a = 3 * i
  local mine, t, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local v = redis.call("GET", KEYS[i])
  local tat = v and tonumber(v)
  if tat and tat >= mine then
    local back = n * t - (tat - mine)
    if mine - now < back then back = mine - now end
    if back > 0 then
      local new = tat - back
      if new <= now then
        redis.call("DEL", KEYS[i])
      else
        redis.call("SET", KEYS[i], new, "PX", math.ceil((new - now) / 1000))
      end
    end
  end
end
return 1
