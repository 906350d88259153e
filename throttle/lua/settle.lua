-- settle.lua: charge one bucket of a reservation what it really used
-- instead of what it took, at most once (after prelude.lua, holes.lua and
-- the bucket's module).
--
-- KEYS       the bucket's four keys (prelude.lua), then the settle's
--            marker (same hash slot): its presence means "already settled"
-- ARGV[1]    now in µs, or "" to read Redis TIME
-- ARGV[2]    the reservation's slot (µs)
-- ARGV[3..8] kind, n (what the reservation took), a1, a2, a3, a4
-- ARGV[9]    the bucket's handle (reserve.lua), two integers: ARGV[9], ARGV[10]
-- ARGV[11]   what the reservation really used, at least 0
-- ARGV[12]   "1": the upstream rule (Bucket.UpstreamSettle; token buckets:
--            tb.lua's refund), else "0"
--
-- Reply: 1 if settled now, 0 if settled before (the marker lasts a second
-- beyond the slot, or beyond now if that is later).
--
-- The module's settle gives the difference back (used < n), as far as it
-- can without letting any span hold more than the policy allows counting
-- each grant at its settled cost, or takes it on top (used > n) where the
-- next grants pay for it, never the settled one (docs/throttle-design.md,
-- "Settle at the real cost"). With the upstream rule, a token bucket gets
-- back at least what such an upstream would give back at once (tb.lua's
-- refund), which the settled-cost promise does not hold to.

local slot = tonumber(ARGV[2])
local left = slot - now
if left < 0 then left = 0 end
if not redis.call("SET", KEYS[5], "1", "NX", "PX", ms(left)) then return 0 end -- ms: a second more
local b = bucket(1, 3)
local m = M[b.kind]
m.load(b)
H.load(b)
local used = tonumber(ARGV[11])
local w0, f0, h0 = b.tw, b.tf, b.h
if used ~= b.n then m.settle(b, used, tonumber(ARGV[9]), tonumber(ARGV[10]), slot) end
if ARGV[12] == "1" and used < b.n and m.refund then m.refund(b, b.n - used, w0, f0, h0) end
return 1
