-- int.lua: integer helpers and an adaptive bucket's rate, put after now.lua
-- before prelude.lua and the lean scripts (reserve_tat.lua, reserve_fw.lua). All quantities are integer µs, counts or indices below
-- 2^53, so the arithmetic is exact in Lua's doubles. Numbers written into
-- strings go through fmt (tostring would round them to 14 digits).

-- a/b rounded down and up, for integers (b > 0); the checks guard against a
-- quotient that rounds onto a whole number.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceildiv(a, b) return -floordiv(-a, b) end

-- ms is a TTL in milliseconds for a span of us µs, at least 1 (PX 0 is an error).
local function ms(us)
  local t = math.ceil(us / 1000)
  if t < 1 then t = 1 end
  return t
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
