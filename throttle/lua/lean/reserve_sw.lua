-- reserve_sw.lua: reserve_tat.lua's counterpart for one sliding window
-- counter (sw.lua's arithmetic and layout) and no Share, after now.lua
-- alone. Its fast path (below) serves the usual call, in the slot the key
-- last booked or refused up to the next one, from the summary the hash
-- keeps: one HMGET and at most one HSET. Its slow path reads the hash once
-- (HGETALL) and writes it once for a batch; the booked slot, the TTL and the
-- slots that left the window are written only when the booked slot moves.
-- It defines no function (each definition is run on every call): sw.lua's
-- and int.lua's fragments are written out here by go generate ./throttle
-- from lua/lean/reserve_sw.lua. It walks the counts with one pass per call;
-- the lockstep tests hold it to sw.lua and the memory store, and check the
-- summary after every step.
--
-- KEYS[1]        the bucket's state (sw.lua's hash)
-- ARGV[1..]      as reserve_tat.lua's: now, n, a1 = Max, a2 = L, a3 = S
--                (sw.lua), each call's longest wait
--
-- Reply: as reserve_tat.lua's (a handle's picoseconds are 0); {3} if the
-- bucket has holes.

local m = #ARGV - 5
local n, max, L, S = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0

local cur -- the slot of now
--= floordiv q=cur a=now b=L

-- The fast path: the summary (sw.lua) answers every call that books in the
-- slot b the key last booked, or is refused there or in the next slot,
-- while b is now's slot or later and no cooldown reaches past it; the
-- figures then need no other slot (a later b leaves nothing to take at
-- once, and c > 0 makes b the latest slot kept). One HMGET and, for grants,
-- one HSET of three fields. Any other call (a new slot, a grant in the next
-- one, no summary) goes to the slow path below, before anything is written.
do
  local f = redis.call("HMGET", KEYS[1], "b", "L", "h", "x", "s", "o", "c", "d")
  if f[4] == "1" then return {3} end
  local b, hold, s, o, c, d = tonumber(f[1]), tonumber(f[3]) or 0, tonumber(f[5]), tonumber(f[6]), tonumber(f[7]), tonumber(f[8])
  if b and s and o and c and d and tonumber(f[2]) == L and b >= cur and hold < (b + 1) * L then
    --= sw.lower bb=b
    local out, k, wrote = nil, 0, false
    if m > 1 then out = {} end
    for j = 1, m do
      local maxwait, e, granted = ARGV[5 + j] + 0, nil, 0
      local off = lower - b * L -- the earliest instant for n in slot b
      --= sw.fit j=b full=s old=o
      if e then
        if maxwait < 0 or e - now <= maxwait then
          s, c, granted, wrote = s + n, c + n, 1, true
          if S == 1 then d = c end
        end
      else
        -- else in slot b+1, whose window holds the summary's slots but
        -- b-S+1, which it weighs (d); refused there, or the slow path's
        off = 0
        --= sw.fit j=b+1 full=s-d old=d
        if not e then break end
        if maxwait < 0 or e - now <= maxwait then break end -- a grant there moves b
      end
      if c == 0 then break end -- the latest slot kept is earlier: the slow path's
      local left, reset = 0, 0
      if b == cur then
        --= sw.left full=s old=o
      end
      --= sw.reset bb=b top=b
      if m == 1 then -- a constructor sizes the table at once (reserve_tat.lua)
        out = {granted, e - now, left, reset, now, granted * b, 0}
      else
        out[k + 1], out[k + 2], out[k + 3], out[k + 4], out[k + 5], out[k + 6], out[k + 7] = granted, e - now, left, reset, now, granted * b, 0
      end
      k = k + 7
    end
    if k == 7 * m then
      if wrote and S == 1 then
        redis.call("HSET", KEYS[1], b, c, "s", s, "c", c, "d", d)
      elseif wrote then
        redis.call("HSET", KEYS[1], b, c, "s", s, "c", c)
      end
      return out
    end
  end
end

-- The slow path: every slot the hash keeps.
local hh = redis.call("HGETALL", KEYS[1])
local b, hl, hold, x
local count = {} -- slot index -> count, for the slots the hash keeps
for i = 1, #hh, 2 do
  local f = hh[i]
  if f == "b" then b = tonumber(hh[i + 1])
  elseif f == "L" then hl = tonumber(hh[i + 1])
  elseif f == "h" then hold = tonumber(hh[i + 1])
  elseif f == "x" then x = hh[i + 1]
  elseif f ~= "s" and f ~= "o" and f ~= "c" and f ~= "d" then count[tonumber(f)] = tonumber(hh[i + 1])
  end
end
if x == "1" then return {3} end
hold = hold or 0
local fresh = b == nil or hl ~= L -- no state, or a changed slot length: no counts
if fresh then b, count = nil, {} end

local out, o, dirty, moved = {}, 0, {}, false
if m == 1 then out = nil end
for k = 1, m do
  local maxwait = ARGV[5 + k] + 0
  -- the earliest instant at or after lower whose slot j leaves room for n
  -- (sw.lua's tail): full counts slots j-S+1 .. j, and the slot j-S weighs
  -- by how much of it the window still covers
  --= sw.lower bb=b
  local j
  --= floordiv q=j a=lower b=L
  -- fc, oc: full and old at cur, for the figures; top: the latest slot kept
  local full, off, e, fc, oc, top = 0, lower - j * L, nil, 0, 0, -1
  for i, c in pairs(count) do
    if i > j - S and i <= j then full = full + c end
    if i > cur - S and i <= cur then fc = fc + c elseif i == cur - S then oc = c end
    if i > top then top = i end
  end
  while true do
    local old = count[j - S] or 0
    --= sw.fit
    if e then break end
    full = full + (count[j + 1] or 0) - (count[j - S + 1] or 0)
    j, off = j + 1, 0
  end
  local wait, granted, handle = e - now, 0, 0
  if maxwait < 0 or wait <= maxwait then -- book n in slot j (e's), the handle
    count[j] = (count[j] or 0) + n
    dirty[j] = true
    if j ~= b then b, moved = j, true end
    if j == cur then fc = fc + n end
    if j > top then top = j end
    granted, handle = 1, j
  end
  -- the figures (sw.lua's): what a call could have at once now, 0 while a
  -- later slot has bookings; the µs until a call for Max would be granted
  local left, reset = max, 0
  if b then
    left = 0
    if b <= cur then
      --= sw.left full=fc old=oc
    end
    --= sw.reset bb=b
  end
  if m == 1 then -- a constructor sizes the table at once (reserve_tat.lua)
    out = {granted, wait, left, reset, now, handle, 0}
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = granted, wait, left, reset, now, handle, 0
  end
  o = o + 7
end

if next(dirty) then
  if fresh and #hh > 0 then redis.call("DEL", KEYS[1]) end
  local set = {}
  for j in pairs(dirty) do -- a slot booked and then left behind is not kept
    if j >= b - S then set[#set + 1], set[#set + 2] = j, count[j] end
  end
  if fresh or moved then
    set[#set + 1], set[#set + 2], set[#set + 3], set[#set + 4] = "b", b, "L", L
    set[#set + 1], set[#set + 2], set[#set + 3], set[#set + 4] = "h", hold, "x", 0
  end
  --= sw.summary bb=b args=set
  redis.call("HSET", KEYS[1], unpack(set))
  if moved then
    if not fresh then -- the slots no window that b's calls can see holds
      local gone = {}
      for i in pairs(count) do
        if i < b - S then gone[#gone + 1] = i end
      end
      if #gone > 0 then redis.call("HDEL", KEYS[1], unpack(gone)) end
    end
    local till = (b + S + 1) * L -- every slot kept is at or before b
    if hold > till then till = hold end
    local ttl
    --= ms t=ttl us=till-now
    redis.call("PEXPIRE", KEYS[1], ttl)
  end
end
return out
