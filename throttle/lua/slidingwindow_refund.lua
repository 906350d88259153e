-- slidingwindow_refund.lua: give back a cancelled SlidingWindow reservation, at most once.
--
-- KEYS[1]   state key (see slidingwindow_reserve.lua)
-- KEYS[2]   the reservation's marker key (same hash slot); its presence means "already refunded"
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   the reservation's slot: the server time (µs) at which it may act
-- ARGV[3]   n, how much it booked
-- ARGV[4]   the slot index it booked (from slidingwindow_reserve.lua's reply)
-- ARGV[5]   Max
-- ARGV[6]   L, a slot's length in microseconds
-- ARGV[7]   S, slots per window
--
-- Reply: 1 if the refund was processed now (what it gives back, if anything, is below),
-- 0 if the slot has passed or it was processed before.
-- n comes off its slot's count if the key still keeps that slot; a count that
-- reaches 0 is removed. The latest booked slot and the key's TTL stay.

local n, j, L = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
if tonumber(redis.call("HGET", KEYS[1], "L")) == L then
  local c = tonumber(redis.call("HGET", KEYS[1], j))
  if c then
    c = c - n
    if c > 0 then
      redis.call("HSET", KEYS[1], j, c)
    else
      redis.call("HDEL", KEYS[1], j)
    end
  end
end
return 1
