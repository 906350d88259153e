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
-- the general script trims them when it loads the log. It defines no
-- function: sl.lua's fragments are written out here by go generate
-- ./throttle from lua/lean/reserve_sl.lua. The lockstep tests hold it to
-- sl.lua and the memory store.
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
    else -- sl.lua's trim, from the eighth entry on
      local lo, hi = 7, 15
      if hi > k - 1 then hi = k - 1 end
      --= sl.edge
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
  --= sl.tail
  local wait, granted, handle = t - now, 0, 0
  if maxwait < 0 or wait <= maxwait then -- sl.lua's commit
    --= sl.push
    if k > max then
      redis.call("LTRIM", key, k - max, -1)
      d = math.max(0, d - (k - max))
      k = max
    end
    last, granted, handle = t, 1, t
  end
  -- the figures, the d stale entries counted out
  --= sl.figures k=k-d
  if m == 1 then -- a constructor sizes the table at once (reserve_tat.lua)
    out = {granted, wait, left, reset, now, handle, 0}
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = granted, wait, left, reset, now, handle, 0
  end
  o = o + 7
end
if last and last ~= last0 then
  --= sl.till t=last
  if not last0 or last0 < p then
    local ttl
    --= ms t=ttl us=till-now
    redis.call("PEXPIRE", key, ttl)
  end
end
return out
