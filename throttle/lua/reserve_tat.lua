-- reserve_tat.lua: reserve.lua and reserve_batch.lua for the commonest
-- calls, one token bucket (a Limit or an Adaptive) or one leaky bucket and
-- no Share, in a script of its own, after now.lua alone (and int.lua for an
-- adaptive bucket, whose atrate it calls): without the general script's
-- definitions, which alone cost a call several µs of server time, and its
-- tables and loops; for a batch, one read and one write of the TAT however
-- many calls it decides. The arithmetic is that of tb.lua, lb.lua and
-- tat.lua, call after call, on what the one before left; the lockstep tests
-- hold it to theirs. It defines no function: each definition is run on every
-- call (int.lua's cost a call 0.4 µs, measured with redis-benchmark), so
-- the divisions are written out where they are needed.
--
-- KEYS[1]        the bucket's state (its TAT, tat.lua)
-- KEYS[2]        its effective rate, only if it is adaptive (int.lua)
-- ARGV[1]        now in µs, or "" to read Redis TIME
-- ARGV[2..5]     n, a1 = T, a2 = burst, a3 = per (tb.lua, lb.lua)
-- ARGV[6..]      each call's longest wait in µs ("-1": no bound), one per
--                call (m of them)
-- tb             true for a token bucket, false for a leaky one: set by the
--                line before this file (scripts.go), as an argument would
--                cost every call
--
-- Reply: for one call, reserve.lua's reply (and the effective T and burst
-- after it, for an adaptive bucket). For a batch (m > 1), a head and then
-- the replies of the calls after the first k: k, now, the TAT before the
-- batch, T and burst (effective), where k is how many of the calls, from
-- the first on, a token bucket grants at once. Those k replies follow from
-- the head (call j's handle is TAT + (j-1)·n·T; redis.go writes them out):
-- one division here instead of k turns of the loop and 6k integers sent
-- (on a hot key most of a batch; a leaky bucket's k is 0). Or {3} if the
-- bucket has holes (its TAT is negated), which only the general script
-- serves: nothing was changed, and the caller asks that one instead.

local m = #ARGV - 5
local n, T, burst, per = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0

if per > 0 then T, burst = atrate(KEYS[2], T, burst, per) end -- int.lua

local tat = tonumber(redis.call("GET", KEYS[1]))
if tat and tat < 0 then return {3} end
if not tat or tat < now then tat = now end

local out, o, wrote, first = {}, 0, false, 1
if m == 1 then
  out = nil
else
  -- k: call j (from 0) is granted at once while its wait, tat - now +
  -- j·n·T + (n - burst)·T, is not positive
  local k, d, s = 0, (burst - n) * T - (tat - now), n * T
  if tb and d >= 0 then
    k = math.floor(d / s)
    if k * s > d then k = k - 1 elseif (k + 1) * s <= d then k = k + 1 end
    k = k + 1
    if k > m then k = m end
  end
  out[1], out[2], out[3], out[4], out[5] = k, now, tat, T, burst
  o, first = 5, k + 1
  if k > 0 then tat, wrote = tat + k * s, true end
end
for j = first, m do
  local maxwait = ARGV[5 + j] + 0
  local granted, wait, handle = 0, 0, 0
  local ahead = tat - now
  if tb then
    local e = ahead + (n - burst) * T -- the grant's wait, if positive
    if e < 0 then e = 0 end
    wait = e
    if maxwait < 0 or wait <= maxwait then
      granted, handle, wrote = 1, tat, true
      if now + e > tat then tat = now + e end
      tat = tat + n * T
    end
  else -- lb: the turn is the TAT; a full bucket refuses
    local over = ahead + (n - burst) * T
    wait = ahead
    if over > 0 then
      if maxwait < 0 or ahead <= maxwait then wait = over end
    elseif maxwait < 0 or wait <= maxwait then
      granted, handle, wrote = 1, tat, true
      tat = tat + n * T
    end
  end
  ahead = tat - now
  -- left: what the bucket could grant at once, burst - ceil(ahead/T) for
  -- both (a token bucket's floor((burst·T - ahead)/T) is the same number);
  -- the checks catch a quotient that rounded onto a whole number (all
  -- integers below 2^53)
  local c = math.ceil(ahead / T)
  if (c - 1) * T >= ahead then c = c - 1 elseif c * T < ahead then c = c + 1 end
  local left = burst - c
  if left < 0 then left = 0 end
  if m == 1 then -- a constructor sizes the table at once: 0.3 µs less than filling it
    out = {granted, wait, left, ahead, now, handle}
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = granted, wait, left, ahead, now, handle
  end
  o = o + 6
  if per > 0 then
    out[o + 1], out[o + 2] = T, burst
    o = o + 2
  end
end
if wrote then redis.call("SET", KEYS[1], tat, "PX", math.ceil((tat - now) / 1000) + 1000) end -- int.lua's ms
return out
