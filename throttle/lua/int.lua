-- int.lua: integer helpers and an adaptive bucket's rate, put after now.lua
-- before prelude.lua, and before reserve_tat.lua for an adaptive bucket
-- (the other lean scripts, reserve_fw.lua, reserve_sl.lua and
-- reserve_sw.lua, write out what they need of it: each definition here is
-- run on every call of a script that includes it). All quantities are
-- integer µs (picoseconds in fine.lua), counts or indices below 2^53, so the
-- arithmetic is exact in Lua's doubles. Numbers written into
-- strings go through fmt (tostring would round them to 14 digits).

-- a/b rounded down and up, for integers (b > 0); the checks guard against a
-- quotient that rounds onto a whole number.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceildiv(a, b) return -floordiv(-a, b) end

-- ms is the TTL in milliseconds of a key whose state matters for us µs more:
-- that, rounded up, and a second of slack. Redis 7.0.15 was seen to drop a
-- key a script had just given a TTL of 1 ms before the same script read it
-- again (12 in 80,000 calls beside two busy loops on 2 cores; none at 2 ms):
-- it seems to count such a TTL from a time read before the script's frozen
-- clock, so a preempted server loses that much of it. A key that outlives its
-- state reads as stale, which every module treats as none (the lockstep tests
-- hold them to it), so the slack costs only memory: an idle key stays a
-- second longer.
local function ms(us)
  return math.ceil(us / 1000) + 1000
end

local function fmt(x) return string.format("%.0f", x) end

-- atrate is an adaptive token bucket (Adaptive) at the fleet's effective
-- rate, read from akey (adapt.lua; none, or "ceiling", leaves the ceiling):
-- T becomes the period (per, µs) over that rate, rounded up as
-- Limit.interval rounds it, never under the ceiling's T; the burst shrinks
-- with it, burst·T/T' rounded down, at least 1 (Adaptive.at in Go).
local function atrate(akey, T, burst, per)
  local h = redis.call("HMGET", akey, "r", "why")
  local r = tonumber(h[1])
  if not r or r <= 0 or h[2] == "ceiling" then return T, burst end
  local x = per / r
  local t = math.floor(x + 0.5)
  if math.abs(x - t) > 1e-9 * x then t = math.ceil(x) end
  if t <= T then return T, burst end
  return t, math.max(1, floordiv(burst * T, t))
end
