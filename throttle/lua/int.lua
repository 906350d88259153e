-- int.lua: integer helpers and an adaptive bucket's rate, put after now.lua
-- before prelude.lua, and before reserve_tat.lua for an adaptive bucket
-- (whose atrate it calls). The lean scripts write floordiv and ceildiv out
-- where a fragment calls them (internal/luagen): each definition here is
-- run on every call of a script that includes it. All quantities are
-- integer µs, counts or indices below 2^53, so the arithmetic is exact in
-- Lua's doubles; a token or leaky bucket's times (its TAT, its T) are two
-- such integers, µs and picoseconds (pico.go). Numbers written into strings
-- go through fmt (tostring would round them to 14 digits).

-- a/b rounded down and up, for integers (b > 0); the checks guard against a
-- quotient that rounds onto a whole number.
local function floordiv(a, b)
  local q
  --{ floordiv: q = a/b rounded down
  q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  --}
  return q
end
local function ceildiv(a, b)
  local q
  --{ ceildiv: q = a/b rounded up
  q = math.ceil(a / b)
  if q * b < a then q = q + 1 elseif (q - 1) * b >= a then q = q - 1 end
  --}
  return q
end

-- ms is the TTL in milliseconds of a key whose state matters for us µs more:
-- that, rounded up, and a second of slack. Redis 7.0.15 was seen to drop a
-- key a script had just given a TTL of 1 ms before the same script read it
-- again when the server was busy (never one of 2 ms): it seems to count such
-- a TTL from a time read before the script's frozen clock, so a preempted
-- server loses that much of it. A key that outlives its
-- state reads as stale, which every module treats as none (the lockstep tests
-- hold them to it), so the slack costs only memory: an idle key stays a
-- second longer.
local function ms(us)
  local t
  --{ ms: t, the TTL in ms of a key whose state matters for us µs more
  t = math.ceil(us / 1000) + 1000
  --}
  return t
end

local function fmt(x) return string.format("%.0f", x) end

-- A token or leaky bucket's times are exact pairs (pico.go): w µs and f
-- picoseconds, 0 <= f < Q. Every f here, sums and n·f with n at most a
-- burst, stays below 2^50, where floor(f/Q) is exact.
local Q = 1000000

-- pn is w µs and f picoseconds with f carried into w.
local function pn(w, f)
  local c = math.floor(f / Q)
  return w + c, f - c * Q
end

-- pmul is n·(w, f), n >= 0.
local function pmul(w, f, n) return pn(n * w, n * f) end

-- pdiv is floor(a/b) for a = (aw, af) >= 0 and b = (bw, bf) > 0, a quotient
-- below 2^31: a float estimate corrected by exact products (floorDivPico).
local function pdiv(aw, af, bw, bf)
  local q = math.floor((aw + af / Q) / (bw + bf / Q))
  if q < 0 then q = 0 end
  local w, f = pmul(bw, bf, q + 1)
  if w < aw or (w == aw and f <= af) then return q + 1 end
  w, f = pmul(bw, bf, q)
  if w > aw or (w == aw and f > af) then return q - 1 end
  return q
end

-- pace is T for an interval of x µs (paceOf in pico.go): whole µs and
-- picoseconds rounded up, but a number within 1e-9·x of a whole one is it.
local function pace(x)
  local w = math.floor(x)
  local p = (x - w) * Q
  local r = math.floor(p + 0.5)
  if math.abs(p - r) > 1e-9 * x then r = math.ceil(p) end
  if r >= Q then return w + 1, 0 end
  return w, r
end

-- atrate is an adaptive token bucket (Adaptive) at the fleet's effective
-- rate, read from akey (adapt.lua; none, or "ceiling", leaves the ceiling):
-- T becomes the period (per, µs) over that rate (pace), never under the
-- ceiling's T (Tw µs, Tf picoseconds); the burst shrinks with it, burst·T/T'
-- rounded down, at least 1 (Adaptive.at in Go). It returns T' (µs,
-- picoseconds) and the burst.
local function atrate(akey, Tw, Tf, burst, per)
  local h = redis.call("HMGET", akey, "r", "why")
  local r = tonumber(h[1])
  if not r or r <= 0 or h[2] == "ceiling" then return Tw, Tf, burst end
  local w, f = pace(per / r)
  if w < Tw or (w == Tw and f <= Tf) then return Tw, Tf, burst end
  local bw, bf = pmul(Tw, Tf, burst)
  local b = pdiv(bw, bf, w, f)
  if b < 1 then b = 1 end
  return w, f, b
end
