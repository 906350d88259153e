-- cooldown.lua: grant nothing from a bucket before now + d, then resume at
-- its policy's pace (after prelude.lua, holes.lua and the policy's module).
--
-- KEYS      the bucket's four keys (prelude.lua)
-- ARGV[1]   now in µs, or "" to read Redis TIME
-- ARGV[2]   d, the cooldown in µs (> 0)
-- ARGV[3..8] the bucket: kind, n (unused), a1, a2, a3, a4
--
-- Reply: µs from now until the bucket grants its next single unit (>= d; more
-- if it was already booked further). A cooldown never shortens one in place.
-- The module holds its state (a token bucket then grants one token at the
-- end, then one per T); holes are voided, as their turns fall in the
-- cooldown; the marker keeps the end for CooldownLeft and Peek.

local d = tonumber(ARGV[2])
local b = bucket(1, 3)
b.n = 1
local m = M[b.kind]
m.load(b)
H.load(b)
H.clear(b)
local till = now + d
m.hold(b, till)
if till > cooldown(b) then redis.call("SET", b.mkey, till, "PX", ms(d)) end
local e, rw = m.tail(b, -1)
local nxt = rw
if e then nxt = e - now end
if nxt < d then nxt = d end -- a full leaky bucket's RetryAfter is when a request fits, not when it goes
return nxt
