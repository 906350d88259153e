-- reserve_mod.lua: the lean main over one policy module (after now.lua,
-- int.lua, prelude.lua and that module: sl.lua or sw.lua): one bucket
-- and no Share, reserve.lua's decision call after call, without the
-- definitions of holes.lua, share.lua and reserve.lua, which alone cost a
-- call several µs of server time. The module writes as it commits.
--
-- KEYS     the bucket's four keys (prelude.lua)
-- ARGV[1]        now in µs, or "" to read Redis TIME
-- ARGV[2]        m, the number of calls
-- ARGV[3..2+m]   each call's longest wait in µs ("-1": no bound)
-- ARGV[3+m..]    kind, n, a1, a2, a3 (prelude.lua)
--
-- Reply: as reserve_tat.lua's; {3} if the bucket has holes.

local m = tonumber(ARGV[2])
local b = bucket(1, 3 + m)
local mod = M[b.kind]
mod.load(b)
if b.h then return {3} end

local out = {}
for j = 1, m do
  local maxwait = tonumber(ARGV[2 + j])
  local e, rw = mod.tail(b, maxwait)
  local granted, wait, handle = 0, rw, 0
  if e then
    if e < now then e = now end
    wait = e - now
    if maxwait < 0 or wait <= maxwait then granted, handle = 1, mod.commit(b, e) end
  end
  local left, reset = mod.figures(b)
  reply(out, granted, wait, left, reset, handle)
end
return out
