-- reserve_tat.lua: reserve.lua and reserve_batch.lua for the commonest
-- calls, one token bucket (a Limit or an Adaptive) or one leaky bucket and
-- no Share, in a script of its own, after now.lua alone (and int.lua for an
-- adaptive bucket, whose atrate it calls): without the general script's
-- definitions, each of which is run on every call, and its tables and
-- loops; for a batch, one read and one write of the TAT however many calls
-- it decides. It defines no function: the arithmetic is tat.lua's, tb.lua's
-- and lb.lua's fragments, written out here by go generate ./throttle from
-- lua/lean/reserve_tat.lua, call after call, on what the one before left.
-- Times are pairs of µs and picoseconds, as in tat.lua.
--
-- KEYS[1]        the bucket's state (its TAT, tat.lua)
-- KEYS[2]        its effective rate, only if it is adaptive (int.lua)
-- ARGV[1]        now in µs, or "" to read Redis TIME
-- ARGV[2..5]     n, a1 = T's µs, a2 = burst, a4 = T's picoseconds (tb.lua,
--                lb.lua), and ARGV[6] a3 = per, only if it is adaptive
-- ARGV[6 or 7..] each call's longest wait in µs ("-1": no bound), one per
--                call (m of them)
-- tb, adaptive   true for a token bucket, false for a leaky one; whether it
--                is adaptive: set by the line before this file
--                (scripts.go), as an argument would cost every call
--
-- Reply: for one call, reserve.lua's reply (and the effective T, µs and
-- picoseconds, and burst after it, for an adaptive bucket). For a batch
-- (m > 1), a head and then the replies of the calls after the first k: k,
-- now, the TAT before the batch (µs, picoseconds), T (µs, picoseconds) and
-- burst (effective), where k is how many of the calls, from the first on, a
-- token bucket grants at once. Those k replies follow from the head (call
-- j's handle is TAT + (j-1)·n·T; redis.go writes them out): one division
-- here instead of k turns of the loop and 7k integers sent (on a hot key
-- most of a batch; a leaky bucket's k is 0). Or {3} if the bucket has holes
-- (its TAT is negated), which only the general script serves: nothing was
-- changed, and the caller asks that one instead.

local Q = 1000000 -- picoseconds per µs
local n, Tw, burst, Tf = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local w0 = 5 -- the waits are ARGV[w0 + 1..]
if adaptive then
  w0 = 6
  Tw, Tf, burst = atrate(KEYS[2], Tw, Tf, burst, ARGV[6] + 0) -- int.lua
end
local m = #ARGV - w0

-- the TAT: tw µs and tf picoseconds, never before now; a value of another
-- form reads as none (tat.lua)
local tw, tf = now, 0
local v = redis.call("GET", KEYS[1])
if v then
  --= tat.parse
  if w and f then
    if w < 0 then return {3} end
    if w >= now then tw, tf = w, f end
  end
end

-- g = (burst - n)·T: a call waits for ahead - g, if positive (a token
-- bucket), or finds the bucket over its capacity by as much (a leaky one);
-- s = n·T, what a grant moves the TAT on by
--= tat.times

--= tat.count

local out, o, wrote, first = {}, 0, false, 1
if m == 1 then
  out = nil
else
  -- k: call j (from 0) is granted at once while its wait, ahead + j·s - g,
  -- is not positive: j·s <= d = g - ahead
  local k = 0
  local dw, df = gw - aw, gf - tf
  if df < 0 then dw, df = dw - 1, df + Q end
  if tb and dw >= 0 then
    k = math.floor((dw + df / Q) / (sw + sf / Q))
    local pf = (k + 1) * sf
    local pw = (k + 1) * sw + math.floor(pf / Q)
    pf = pf % Q
    if pw < dw or (pw == dw and pf <= df) then -- (k+1)·s <= d
      k = k + 1
    else
      pw, pf = pw - sw, pf - sf
      if pf < 0 then pw, pf = pw - 1, pf + Q end
      if pw > dw or (pw == dw and pf > df) then k = k - 1 end -- k·s > d
    end
    k = k + 1
    if k > m then k = m end
  end
  out[1], out[2], out[3], out[4], out[5], out[6], out[7] = k, now, tw, tf, Tw, Tf, burst
  o, first = 7, k + 1
  if k > 0 then
    local pf = tf + k * sf
    tw = tw + k * sw + math.floor(pf / Q)
    tf = pf % Q
    wrote, c = true, c + k * n
  end
end
for j = first, m do
  local maxwait = ARGV[w0 + j] + 0
  local granted, wait, hw, hf = 0, 0, 0, 0
  --= tat.over
  if tb then -- the wait is ew, if positive (tb.lua's tail)
    if ew > 0 then wait = ew end
    if maxwait < 0 or wait <= maxwait then granted = 1 end
  else -- the turn is the TAT, rounded up (lb.lua's tail)
    --= tat.ahead ahead=wait
    --= lb.full
    if not full and (maxwait < 0 or wait <= maxwait) then granted = 1 end
  end
  if granted == 1 then
    hw, hf, wrote, c = tw, tf, true, c + n
    -- counted from the TAT, or from the earliest instant that rounds up to
    -- the slot if that is later: a token bucket's call for more than its
    -- burst (an adaptive one's, at a rate below its ceiling), or a leaky
    -- bucket's never
    local s = now + wait
    --= tat.after
  end
  local left = burst - c
  if left < 0 then left = 0 end
  local reset
  --= tat.ahead ahead=reset
  if m == 1 then -- a constructor sizes the table at once, cheaper than filling it
    out = {granted, wait, left, reset, now, hw, hf}
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = granted, wait, left, reset, now, hw, hf
  end
  o = o + 7
  if adaptive then
    out[o + 1], out[o + 2], out[o + 3] = Tw, Tf, burst
    o = o + 3
  end
end
if wrote then -- tat.lua's put
  --= tat.value
  local px
  --= ms t=px us=ttl
  redis.call("SET", KEYS[1], v, "PX", px)
end
return out
