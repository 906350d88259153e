-- fixedwindow_refund.lua: give back a cancelled FixedWindow reservation, at most once.
--
-- KEYS[1]   state key (see fixedwindow_reserve.lua)
-- KEYS[2]   the reservation's marker key (same hash slot); its presence means "already refunded"
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   the reservation's slot: the server time (µs) at which it may act
-- ARGV[3]   n, how much it booked
-- ARGV[4]   the window it booked (from fixedwindow_reserve.lua's reply)
-- ARGV[5]   Max
-- ARGV[6]   W, the window's length in microseconds
--
-- Reply: 1 if the refund was processed now (what it gives back, if anything, is below),
-- 0 if the slot has passed or it was processed before.
-- n comes off the count only if the reservation's window is still the cursor's:
-- once a later window has bookings, the later requests already went past it.
-- The key keeps its TTL: the cursor does not move.

local n, window, W = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local st = redis.call("HMGET", KEYS[1], "w", "c", "W")
local w, c = tonumber(st[1]), tonumber(st[2])
if w == window and c and tonumber(st[3]) == W then
  c = c - n
  if c < 0 then c = 0 end
  redis.call("HSET", KEYS[1], "c", c)
end
return 1
