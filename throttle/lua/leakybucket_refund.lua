-- leakybucket_refund.lua: give back a cancelled turn on a leaky bucket, at most once.
--
-- KEYS[1]  the meter (see leakybucket_reserve.lua)
-- KEYS[2]  the reservation's marker key (same hash slot); its presence means "already refunded"
-- ARGV[1]  now in microseconds, or "" to read Redis TIME
-- ARGV[2]  the reservation's slot: the server time (µs) at which it may act
-- ARGV[3]  n, tokens reserved
-- ARGV[4]  the TAT the reservation left (leakybucket_reserve.lua's handle)
-- ARGV[5]  T, microseconds per token
-- ARGV[6]  capacity
--
-- Reply: 1 if the refund was processed now (what it gives back, if anything, is below),
-- 0 if the slot has passed or it was processed before.
-- The turn goes back only if it is the last one booked (the TAT is still the
-- one it left): the TAT moves back to the reservation's slot, which is after
-- now. Under a later turn nothing goes back: unlike a token bucket, where a
-- refund only counts tokens, moving the TAT back here would book the next
-- turn on top of that later one, two tokens at once.

local n, mine, t = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local v = redis.call("GET", KEYS[1])
if v and tonumber(v) == mine then
  local new = mine - n * t
  redis.call("SET", KEYS[1], new, "PX", math.ceil((new - now) / 1000))
end
return 1
