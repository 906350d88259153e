-- reserve_tb.lua: reserve.lua and reserve_batch.lua for the common call, one
-- token bucket (a Limit, or an Adaptive) and no Share, in a script of its own
-- (after prelude.lua): none of the general script's tables and loops, and
-- for a batch one read and one write of the TAT however many calls it
-- decides. The arithmetic is tb.lua's and tat.lua's, call after call.
--
-- KEYS[1]        the bucket's state (its TAT, tat.lua)
-- KEYS[2]        its effective rate if it is adaptive (tb.lua), else KEYS[1]
-- ARGV[1]        now in µs, or "" to read Redis TIME
-- ARGV[2]        m, the number of calls
-- ARGV[3..2+m]   each call's longest wait in µs ("-1": no bound)
-- ARGV[3+m..]    n, T, burst, period (µs, > 0 for an adaptive bucket)
--
-- Reply: the m replies of reserve.lua, one after the other; or {3} if the
-- bucket has holes (its TAT is negated), which only the general script
-- serves: nothing was changed, and the caller asks that one instead.

local m = tonumber(ARGV[2])
local a = 3 + m
local b = {akey = KEYS[2], n = tonumber(ARGV[a]), a1 = tonumber(ARGV[a + 1]),
  a2 = tonumber(ARGV[a + 2]), a3 = tonumber(ARGV[a + 3])}

if b.a3 > 0 then -- tb.lua's rate
  local h = redis.call("HMGET", b.akey, "r", "why")
  local r = tonumber(h[1])
  if r and r > 0 and h[2] ~= "ceiling" then
    local x = b.a3 / r
    local t = math.floor(x + 0.5)
    if math.abs(x - t) > 1e-9 * x then t = math.ceil(x) end
    if t > b.a1 then
      b.a2 = math.max(1, floordiv(b.a2 * b.a1, t))
      b.a1 = t
    end
  end
end

local v = tonumber(redis.call("GET", KEYS[1]))
if v and v < 0 then return {3} end
local tat = v
if not tat or tat < now then tat = now end
local n, T, burst = b.n, b.a1, b.a2

local out, wrote = {}, false
for j = 1, m do
  local maxwait = tonumber(ARGV[2 + j])
  local e = tat + (n - burst) * T
  if e < now then e = now end
  local wait, granted, handle = e - now, 0, 0
  if maxwait < 0 or wait <= maxwait then
    granted, handle = 1, tat
    if e > tat then tat = e end
    tat = tat + n * T
    wrote = true
  end
  local left = floordiv(burst * T - (tat - now), T)
  if left < 0 then left = 0 end
  out[#out + 1] = granted
  out[#out + 1] = wait
  out[#out + 1] = left
  out[#out + 1] = tat - now
  out[#out + 1] = now
  out[#out + 1] = handle
  if b.a3 > 0 then
    out[#out + 1] = T
    out[#out + 1] = burst
  end
end
if wrote then redis.call("SET", KEYS[1], tat, "PX", ms(tat - now)) end
return out
