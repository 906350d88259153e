-- giveback.lua: give back grants a process booked ahead and nobody took
-- (prefetch.go), after prelude.lua, holes.lua and the bucket's module. The
-- latest first, each while it is still the bucket's latest booking, rolled
-- back as refund.lua rolls one back; the first that is not (a later booking
-- stands on it) stops it, and it and those before it stay spent. Unlike
-- refund.lua it serves grants whose instant has passed: they were never
-- handed to a caller, so the state may forget them (a token bucket's TAT
-- goes back, never before now or a cooldown's end; a window's count comes
-- down). At most once per id (the marker), as the client may retry a call.
--
-- KEYS        the bucket's four keys (prelude.lua), then the marker
-- ARGV[1]     now in µs, or "" to read Redis TIME
-- ARGV[2..7]  kind, n, a1, a2, a3, a4 (prelude.lua)
-- ARGV[8..]   the grants, latest first: handle (two integers) and slot each
--
-- Reply: how many were given back.

if not redis.call("SET", KEYS[5], "1", "NX", "PX", ms(0)) then return 0 end -- ms: a second
local b = bucket(1, 2)
local m = M[b.kind]
m.load(b)
H.load(b)
local gave = 0
for i = 8, #ARGV, 3 do
  local handle, hf, slot = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if (handle == 0 and hf == 0) or not m.istail(b, handle, slot, hf) then break end
  m.rollback(b, b.n, handle, hf)
  gave = gave + 1
end
return gave
