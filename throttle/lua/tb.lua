-- tb.lua: the token bucket (Limit) as GCRA, on the TAT state of tat.lua.
-- a1 = T, µs per token; a2 = burst. n tokens fit once the TAT after taking
-- them is at most burst·T ahead. a3 > 0 makes the bucket adaptive
-- (Adaptive): a1 and a2 are its ceiling's and a3 its period in µs.

M.tb = {
  flag = TAT.flag, commit = TAT.commit, istail = TAT.istail,
  has = TAT.has, release = TAT.release, holetill = TAT.holetill,
}

-- rate moves an adaptive bucket to the fleet's effective rate r, read from
-- its adapt hash (adapt.lua; none, or "ceiling", leaves the ceiling): T
-- becomes the period over r, rounded up as Limit.interval rounds it, never
-- under the ceiling's, and the burst shrinks with it, a2·a1/T rounded down,
-- at least 1 (Adaptive.at in Go). b.adaptive tells reserve.lua to reply with
-- the T and burst taken under, which a refund must use.
local function rate(b)
  if b.a3 <= 0 then return end
  b.adaptive = true
  local h = redis.call("HMGET", b.akey, "r", "why")
  local r = tonumber(h[1])
  if not r or r <= 0 or h[2] == "ceiling" then return end
  local x = b.a3 / r
  local t = math.floor(x + 0.5)
  if math.abs(x - t) > 1e-9 * x then t = math.ceil(x) end
  if t > b.a1 then
    b.a2 = math.max(1, floordiv(b.a2 * b.a1, t))
    b.a1 = t
  end
end

function M.tb.load(b)
  rate(b)
  TAT.load(b)
end

function M.tb.tail(b)
  local e = b.tat + (b.n - b.a2) * b.a1
  if e < now then e = now end
  return e
end

function M.tb.figures(b)
  local ahead = b.tat - now
  local left = floordiv(b.a2 * b.a1 - ahead, b.a1)
  if left < 0 then left = 0 end
  return left, ahead
end

-- a rollback never undoes a cooldown: the TAT stays at or after its end + (burst-1)·T.
function M.tb.rollback(b, n, handle)
  local floor = now
  local c = cooldown(b)
  if c > 0 and c + (b.a2 - 1) * b.a1 > floor then floor = c + (b.a2 - 1) * b.a1 end
  TAT.rollback(b, n, handle, floor)
end

-- hold: nothing before till, then one token, then one per T.
function M.tb.hold(b, till)
  local t = till + (b.a2 - 1) * b.a1
  if t > b.tat then
    b.tat = t
    TAT.put(b)
  end
end
