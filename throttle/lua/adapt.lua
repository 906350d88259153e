-- adapt.lua: the effective rate of an adaptive token bucket (adaptive.go):
-- what the fleet has learned the upstream allows, between a floor and the
-- configured ceiling, on the server's clock. adaptive_law.go is the same law
-- in Go, for the MemoryStore; the conformance test holds them together.
--
-- KEYS[1]  <bucket>:adapt, a hash: r (rate, per period), at (µs of the last
--          change), why (ceiling|429|header|recovery), ok and okat (successes
--          since the last change, counted from okat)
-- ARGV[1]  now in µs, or "" for Redis TIME (now.lua)
-- ARGV[2]  op: read | refused | ok | announce
-- ARGV[3]  ceiling, ARGV[4] floor (rates per period)
-- ARGV[5]  n: successes for ok, the announced rate for announce
-- ARGV[6]  period µs, ARGV[7] hold µs (one decrease per episode),
-- ARGV[8]  step µs (one additive increase per step), ARGV[9] alpha (increase
--          per step, a fraction of the ceiling), ARGV[10] beta (decrease
--          factor), ARGV[11] ttl ms of an idle state
--
-- Reply: {rate as a string, why, µs since the last change}.

local op = ARGV[2]
local ceil, floor = tonumber(ARGV[3]), tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local period, hold, step = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local alpha, beta, ttl = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])

local h = redis.call("HMGET", KEYS[1], "r", "at", "why", "ok", "okat")
local r, at, why = tonumber(h[1]), tonumber(h[2]), h[3]
local ok, okat = tonumber(h[4]) or 0, tonumber(h[5]) or now
if not r then r, at, why = ceil, now, "ceiling" end
r = math.min(math.max(r, floor), ceil)

local changed = false
local function set(rate, reason)
  r, at, why, ok, okat, changed = math.min(math.max(rate, floor), ceil), now, reason, 0, now, true
end

if op == "refused" then
  if not (why == "429" and now - at < hold) then
    local new = r * beta
    if ok >= 3 and now - okat >= period / 2 then
      -- what the upstream let through since the last change, a little under
      new = math.min(new, 0.95 * ok * period / (now - okat))
    end
    set(new, "429")
  end
elseif op == "ok" then
  ok = ok + n
  if r < ceil and why ~= "header" and now - at >= step then
    set(r + alpha * ceil * math.floor((now - at) / step), "recovery")
  else
    changed = true -- the count moved
  end
elseif op == "announce" then
  set(n, "header")
end

if changed then
  redis.call("HSET", KEYS[1], "r", tostring(r), "at", at, "why", why, "ok", ok, "okat", okat)
  redis.call("PEXPIRE", KEYS[1], ttl)
end
return {tostring(r), why, now - at}
