-- reserve_tat.lua: reserve.lua and reserve_batch.lua for the commonest
-- calls, one token bucket (a Limit or an Adaptive) or one leaky bucket and
-- no Share, in a script of its own (after now.lua and int.lua): without the general
-- script's definitions, which alone cost a call several µs of server time,
-- and its tables and loops; for a batch, one read and one write of the TAT
-- however many calls it decides. The arithmetic is that of tb.lua, lb.lua
-- and tat.lua, call after call, on what the one before left; the lockstep
-- tests hold it to theirs.
--
-- KEYS[1]        the bucket's state (its TAT, tat.lua)
-- KEYS[2]        its effective rate if it is adaptive (int.lua), else KEYS[1]
-- ARGV[1]        now in µs, or "" to read Redis TIME
-- ARGV[2]        m, the number of calls
-- ARGV[3..2+m]   each call's longest wait in µs ("-1": no bound)
-- ARGV[3+m..]    kind (tb | lb), n, a1, a2, a3 (prelude.lua)
--
-- Reply: the m replies of reserve.lua, one after the other; or {3} if the
-- bucket has holes (its TAT is negated), which only the general script
-- serves: nothing was changed, and the caller asks that one instead.

local m = tonumber(ARGV[2])
local a = 3 + m
local kind, n = ARGV[a], tonumber(ARGV[a + 1])
local T, burst, per = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])

if per > 0 then T, burst = atrate(KEYS[2], T, burst, per) end -- int.lua

local v = tonumber(redis.call("GET", KEYS[1]))
if v and v < 0 then return {3} end
local tat = v
if not tat or tat < now then tat = now end

local out, wrote = {}, false
for j = 1, m do
  local maxwait = tonumber(ARGV[2 + j])
  local granted, wait, handle = 0, 0, 0
  local ahead = tat - now
  if kind == "tb" then
    local e = tat + (n - burst) * T
    if e < now then e = now end
    wait = e - now
    if maxwait < 0 or wait <= maxwait then
      granted, handle = 1, tat
      if e > tat then tat = e end
      tat = tat + n * T
    end
  else -- lb: the turn is the TAT; a full bucket refuses
    local over = ahead + (n - burst) * T
    if over > 0 then
      wait = ahead
      if maxwait < 0 or ahead <= maxwait then wait = over end
    else
      wait = ahead
      if maxwait < 0 or wait <= maxwait then
        granted, handle = 1, tat
        tat = tat + n * T
      end
    end
  end
  if granted == 1 then wrote = true end
  ahead = tat - now
  local left
  if kind == "tb" then
    left = floordiv(burst * T - ahead, T)
  else
    left = burst - ceildiv(ahead, T)
  end
  if left < 0 then left = 0 end
  reply(out, granted, wait, left, ahead, handle)
  if per > 0 then
    out[#out + 1] = T
    out[#out + 1] = burst
  end
end
if wrote then redis.call("SET", KEYS[1], tat, "PX", ms(tat - now)) end
return out
