-- reserve_sl.lua: reserve_tat.lua's counterpart for one sliding log
-- (sl.lua's arithmetic and layout) and no Share, after now.lua alone. Every
-- Redis call costs the server about a µs, so it asks for little:
--   - one EXISTS for the holes and cooldown keys (both absent, the usual
--     case; then it looks at each);
--   - the log's first eight entries in one LRANGE: how many of them have
--     left every window that can still matter (sl.lua's trim); they are
--     dropped only once four or more have (one LTRIM in four calls where one
--     entry leaves per call), and counted out of the figures until then; if
--     all eight have left, the rest is searched as sl.lua's trim does;
--   - LLEN and the last entry only when the log is longer than those eight;
--   - one RPUSH per grant, whose reply is the new length;
--   - the TTL only when a grant lands in a later period of min(Window, 1 s)
--     than the log's last entry: it is set to cover the whole period (plus
--     int.lua's second of slack), so later grants in it need none.
-- The stale entries it leaves at the front change no answer: the tail's
-- e_(k-Max+n) + Window is at or before now for such an entry (sl.lua), and
-- the general script trims them when it loads the log. The lockstep tests
-- hold it to sl.lua and the memory store.
--
-- KEYS           the first three of the bucket's keys (prelude.lua): state,
--                holes, cooldown marker
-- ARGV[1..]      as reserve_tat.lua's: now, n, a1 = Max, a2 = Window (µs),
--                a3 (unused), each call's longest wait
--
-- Reply: as reserve_tat.lua's (a handle's picoseconds are 0); {3} if the
-- bucket has holes.

local m = #ARGV - 5
local n, max, W = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local key = KEYS[1]

local hold = 0
if redis.call("EXISTS", KEYS[2], KEYS[3]) > 0 then
  if redis.call("EXISTS", KEYS[2]) == 1 then return {3} end
  local c = tonumber(redis.call("GET", KEYS[3]))
  if c and c > now then hold = c end
end

-- k entries, the last one last, the first d of them at or before edge
local edge = now - W
local head = redis.call("LRANGE", key, 0, 7)
local k, d, last = #head, 0, nil
if k > 0 then
  while d < k and head[d + 1] + 0 <= edge do d = d + 1 end
  if k == 8 then
    k = redis.call("LLEN", key)
  end
  if k > 8 then last = tonumber(redis.call("LINDEX", key, -1)) else last = head[k] + 0 end
  if d == 8 and k > 8 then
    if last <= edge then
      d = k
    else -- look twice as far in each time, then halve (sl.lua's trim)
      local lo, hi = 7, 15 -- old(lo); the first entry after the edge is in (lo, hi]
      if hi > k - 1 then hi = k - 1 end
      while tonumber(redis.call("LINDEX", key, hi)) <= edge do
        lo, hi = hi, hi * 2
        if hi > k - 1 then hi = k - 1 end
      end
      while hi - lo > 1 do
        local mid = math.floor((lo + hi) / 2)
        if tonumber(redis.call("LINDEX", key, mid)) <= edge then lo = mid else hi = mid end
      end
      d = hi
    end
  end
  if d == k then
    redis.call("DEL", key)
    k, d, last = 0, 0, nil
  elseif d >= 4 then
    redis.call("LTRIM", key, d, -1)
    k, d = k - d, 0
  end
end

local last0, out, o = last, {}, 0
if m == 1 then out = nil end
for j = 1, m do
  local maxwait = ARGV[5 + j] + 0
  -- the earliest time for n (sl.lua's tail)
  local t = now
  if k > 0 then
    if last > t then t = last end
    local i = k - max + n
    if i >= 1 then
      local due = tonumber(redis.call("LINDEX", key, i - 1)) + W
      if due > t then t = due end
    end
  end
  if hold > t then t = hold end
  local wait, granted, handle = t - now, 0, 0
  if maxwait < 0 or wait <= maxwait then -- n entries at t (sl.lua's commit)
    if n == 1 then
      k = redis.call("RPUSH", key, t)
    else
      local c = n
      while c > 0 do -- in chunks below Lua's unpack limit
        local chunk = {}
        for x = 1, math.min(c, 1000) do chunk[x] = t end
        k = redis.call("RPUSH", key, unpack(chunk))
        c = c - #chunk
      end
    end
    if k > max then
      redis.call("LTRIM", key, k - max, -1)
      d = math.max(0, d - (k - max))
      k = max
    end
    last, granted, handle = t, 1, t
  end
  -- the figures (sl.lua's), the d stale entries counted out
  local left, reset = max, 0
  if k > 0 then
    reset = last + W - now
    if reset < 0 then reset = 0 end
    left = 0
    if last <= now then left = max - (k - d) end
    if left < 0 then left = 0 end
  end
  if m == 1 then -- a constructor sizes the table at once (reserve_tat.lua)
    out = {granted, wait, left, reset, now, handle, 0}
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = granted, wait, left, reset, now, handle, 0
  end
  o = o + 7
end
if last and last ~= last0 then
  local g = W -- the TTL's period (sl.lua's commit)
  if g > 1000000 then g = 1000000 end
  local p = last - last % g -- the start of last's period
  if not last0 or last0 < p then
    redis.call("PEXPIRE", key, math.ceil((p + g + W - now) / 1000) + 1000) -- int.lua's ms
  end
end
return out
