-- adapt.lua: the effective rate of an adaptive token bucket (adaptive.go):
-- what the fleet has learned the upstream allows, between a floor and the
-- configured ceiling, on the server's clock. adaptive_law.go is the same law
-- in Go, for the MemoryStore; the lockstep test holds them together.
--
-- KEYS[1]  <bucket>:adapt, a hash: r (rate, per period), at (µs of the last
--          change), why (ceiling|429|header|recovery), pk (the rate at the
--          last refusal), ok (successes counted since the last change, from
--          okat to okl, the first and the latest report after it). None
--          is a cold bucket: its upstream has not answered yet (or was
--          forgotten after idling); a read replies why "cold", and the first
--          report stores the state at the ceiling before it applies.
-- ARGV[1]  now in µs, or "" for Redis TIME (now.lua)
-- ARGV[2]  op: read | refused | ok | announce
-- ARGV[3]  ceiling, ARGV[4] floor (rates per period)
-- ARGV[5]  n: successes for ok, the announced rate for announce
-- ARGV[6]  period µs, ARGV[7] hold µs (one decrease per episode),
-- ARGV[8]  step µs (increases come per step), ARGV[9] alpha (additive
--          increase per step, a fraction of the ceiling), ARGV[10] beta
--          (decrease factor without a measured rate), ARGV[11] ttl ms of an
--          idle state, ARGV[12] quiet µs (no increase so soon after a
--          decrease), ARGV[13] gamma (multiplicative increase per step while
--          far under the rate of the last refusal)
--
-- Reply: {rate as a string, why (ceiling|cold|429|header|recovery), µs since
-- the last change}.

local op = ARGV[2]
local ceil, floor = tonumber(ARGV[3]), tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local period, hold, step = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local alpha, beta, ttl = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local quiet, gamma = tonumber(ARGV[12]), tonumber(ARGV[13])

local h = redis.call("HMGET", KEYS[1], "r", "at", "why", "pk", "ok", "okat", "okl")
local r, at, why = tonumber(h[1]), tonumber(h[2]), h[3]
local pk, ok, okat, okl = tonumber(h[4]) or 0, tonumber(h[5]) or 0, tonumber(h[6]) or 0, tonumber(h[7]) or 0
if not r then r, at, why = ceil, now, "cold" end
if why == "ceiling" or why == "cold" then r = ceil end -- at the ceiling: follow it if it moves
r = math.min(math.max(r, floor), ceil)

local changed = false
local function set(rate, reason)
  r, at, why, ok, okat, okl, changed = math.min(math.max(rate, floor), ceil), now, reason, 0, 0, 0, true
end

if op == "refused" then
  if not (why == "429" and now - at < hold) then
    -- Blind (nothing measured): x beta, and the new rate is the reference
    -- to probe from. Measured: a little under what the upstream let through
    -- between the first and the latest report of successes since the last
    -- change, and the rate that failed is the reference.
    local new = r * beta
    local ref = new
    if ok >= 3 and okl - okat >= period / 2 then
      new = 0.9 * ok * period / (okl - okat)
      -- the rate that failed, or most of the reference before it: a limit
      -- that dropped for a while is climbed back to fast when it rises again
      ref = math.max(r, 0.9 * pk)
    end
    pk = ref
    set(math.min(new, r), "429")
  end
elseif op == "ok" then
  if okat == 0 then
    okat = now -- successes are counted after this report
  else
    ok = ok + n
  end
  okl = now
  changed = true
  local steps = math.floor((now - at) / step)
  if r < ceil and why ~= "header" and steps >= 1 and not (why == "429" and now - at < quiet) then
    local target = pk
    if target <= 0 then target = ceil end
    local new = r
    for _ = 1, steps do
      if new < 0.8 * target then
        new = math.min(new * gamma, 0.8 * target) -- far under: climb fast
      else
        new = new + alpha * ceil -- near the last refusal: probe slowly
      end
    end
    local keep_ok, keep_okat, keep_okl = ok, okat, okl
    if new >= ceil then set(ceil, "ceiling") else set(new, "recovery") end
    ok, okat, okl = keep_ok, keep_okat, keep_okl -- the measurement goes on
  end
elseif op == "announce" then
  -- Each answer's rate is the least its fields allow (their rounding hides
  -- up to a unit): one lower than a rate announced within the hold is the
  -- same quota read less closely, not a drop, and the higher one stands.
  -- One within 5 % under it confirms it: the hold runs from it.
  if not (why == "header" and n < r and now - at < hold) then
    set(n, "header")
  elseif n >= 0.95 * r then
    at, changed = now, true
  end
end

if changed then
  if why == "cold" then why = "ceiling" end -- answered: no longer cold
  redis.call("HSET", KEYS[1], "r", tostring(r), "at", at, "why", why, "pk", tostring(pk),
    "ok", ok, "okat", okat, "okl", okl)
  redis.call("PEXPIRE", KEYS[1], ttl)
end
return {tostring(r), why, now - at}
