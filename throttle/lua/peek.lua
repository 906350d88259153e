-- peek.lua: a bucket's state, taking nothing (after prelude.lua, holes.lua
-- and the policy's module).
--
-- KEYS      the bucket's four keys (prelude.lua)
-- ARGV[1]   now in µs, or "" to read Redis TIME
-- ARGV[2..7] the bucket: kind, n (the request to look at), a1, a2, a3, a4
--
-- Reply: {remaining, next µs, reset µs, cooldown left µs, now µs}
--   remaining and reset as reserve.lua's; next: the wait a request for n
--   would be given now (a hole's turn included), or a full leaky bucket's
--   RetryAfter; cooldown left: 0 if there is none.

local b = bucket(1, 2)
local m = M[b.kind]
m.load(b)
H.load(b, true)
local e, rw = m.tail(b, -1)
local nxt = rw
if e then nxt = e - now end
local x = H.best(b, now)
if x and (e == nil or x - now < nxt) then nxt = x - now end
local r, z = m.figures(b)
local c = cooldown(b) - now
if c < 0 then c = 0 end
if nxt < c then nxt = c end
return {r, nxt, z, c, now}
