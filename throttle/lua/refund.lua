-- refund.lua: give a cancelled reservation's turn back, at most once (after
-- prelude.lua, holes.lua and the modules of the call's policies).
--
-- KEYS      four per bucket (prelude.lua), then the reservation's refund
--           marker (same hash slot): its presence means "already refunded"
-- ARGV[1]   now in µs, or "" to read Redis TIME
-- ARGV[2]   the reservation's slot: the time (µs) at which it may act
-- ARGV[3]   the refund's id, which names its holes
-- ARGV[4..] six per bucket: kind, n, a1, a2, a3, a4; then the k handles,
--           two integers each (reserve.lua)
--
-- Reply: 1 if the refund was processed now, 0 if the slot has passed or it
-- was processed before (the marker lasts until a second after the slot).
--
-- In each bucket: the latest booking rolls back (the module gives back what
-- it took); one that later bookings stand on becomes a hole, its turn offered
-- to the next callers (holes.lua). A bucket whose state no longer counts the
-- reservation (reset, or its policy changed) gets nothing.

local slot = tonumber(ARGV[2])
if now >= slot then return 0 end
if not redis.call("SET", KEYS[#KEYS], "1", "NX", "PX", ms(slot - now)) then return 0 end -- ms: a second more

local k = (#KEYS - 1) / 4
for i = 1, k do
  local b = bucket(i, 4)
  local a = 2 + 6 * k + 2 * i
  local handle, hf = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local m = M[b.kind]
  m.load(b)
  H.load(b)
  if (handle ~= 0 or hf ~= 0) and m.istail(b, handle, slot, hf) then
    m.rollback(b, b.n, handle, hf)
  elseif m.has(b, handle, hf) then
    H.add(b, b.n, slot, handle, hf, ARGV[3])
  end
end
return 1
