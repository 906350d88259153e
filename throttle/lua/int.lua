-- int.lua: integer helpers, put after now.lua before prelude.lua and
-- reserve_tat.lua. All quantities are integer µs, counts or indices below
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
