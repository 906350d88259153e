-- sl.lua: the sliding log (SlidingLog). a1 = Max, a2 = Window µs. At most Max
-- tokens are granted in any window (x - Window, x].
--
-- KEYS: a list of grant times in µs, oldest first, non-decreasing, one entry
-- per token, at most Max entries; it expires after its last entry leaves the
-- window (at the end of that entry's period of min(Window, 1 s), plus
-- int.lua's slack: see commit). A cooldown is read from the marker; the
-- holes key's existence says whether there are holes.
--
-- The earliest time for n is t = max(now, e_k, e_(k-Max+n) + Window) for the
-- log's k entries e_1..e_k, the last term only when k-Max+n >= 1: then
-- e_1..e_(k-Max+n) have left the window and at most Max-n remain in it.
-- Entries dropped to keep Max are at or before e_(k-Max+n) <= t - Window, and
-- every later grant is at or after t, so no window that can still matter
-- holds them (rollback keeps that true when it moves the log's end back).
--
-- The arithmetic reserve_sl.lua shares is marked as fragments (--{ name
-- ... --}; internal/luagen), over local variables: key the log, k its
-- length, last its last entry, max = Max, W = Window, n the tokens of a
-- call, hold the cooldown's end.

M.sl = {}

function M.sl.load(b)
  b.k = redis.call("LLEN", b.key)
  b.last = nil
  if b.k > 0 then b.last = tonumber(redis.call("LINDEX", b.key, -1)) end
  b.h = redis.call("EXISTS", b.hkey) == 1
  b.hold = cooldown(b)
  M.sl.trim(b)
end

-- trim drops the entries at or before now - Window from the log's front: no
-- window that ends at now or later holds them, and every question a call
-- asks of the log is about such windows (tail's e_(k-Max+n) + Window, if it
-- was dropped, is at or before now; figures then counts every entry left).
-- It looks 1, 2, 4... entries in, then halves: few reads where few entries
-- leave, the usual case, and O(log k) where many do.
function M.sl.trim(b)
  local edge = now - b.a2
  if b.k == 0 or tonumber(redis.call("LINDEX", b.key, 0)) > edge then return end
  if b.last <= edge then
    redis.call("DEL", b.key)
    b.k, b.last = 0, nil
    return
  end
  local key, k, lo, hi = b.key, b.k, 0, 1
  --{ sl.edge: hi, the index of the first entry after edge, which is in
  -- (lo, hi] (the entry at lo is at or before edge, the last one after
  -- it): hi moves out twice as far each time, then the span halves
  while tonumber(redis.call("LINDEX", key, hi)) <= edge do
    lo, hi = hi, hi * 2
    if hi > k - 1 then hi = k - 1 end
  end
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call("LINDEX", key, mid)) <= edge then lo = mid else hi = mid end
  end
  --}
  redis.call("LTRIM", b.key, hi, -1)
  b.k = b.k - hi
end

function M.sl.flag(b, on) b.h = on end

function M.sl.tail(b)
  local key, k, last, max, W, n, hold = b.key, b.k, b.last, b.a1, b.a2, b.n, b.hold
  --{ sl.tail: t, the earliest time for n
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
  --}
  return t
end

-- pushfront puts c copies of v at the log's front, in chunks below Lua's
-- unpack limit.
local function pushfront(key, c, v)
  while c > 0 do
    local chunk = {}
    for j = 1, math.min(c, 1000) do chunk[j] = v end
    redis.call("LPUSH", key, unpack(chunk))
    c = c - #chunk
  end
end

function M.sl.commit(b, s)
  local key, n, t, W, k = b.key, b.n, s, b.a2, nil
  --{ sl.push: n entries at t on the log's end, in chunks below Lua's
  -- unpack limit; k, its length after
  if n == 1 then
    k = redis.call("RPUSH", key, t)
  else
    local c = n
    while c > 0 do
      local chunk = {}
      for x = 1, math.min(c, 1000) do chunk[x] = t end
      k = redis.call("RPUSH", key, unpack(chunk))
      c = c - #chunk
    end
  end
  --}
  if k > b.a1 then
    redis.call("LTRIM", key, k - b.a1, -1)
    k = b.a1
  end
  b.k, b.last = k, t
  --{ sl.till: till, when the log may expire after a grant at t: the TTL
  -- covers every grant in t's period of min(Window, 1 s) (from p on), so
  -- that reserve_sl.lua sets it only when a grant lands in a later period
  local g = W
  if g > 1000000 then g = 1000000 end
  local p = t - t % g
  local till = p + g + W
  --}
  expire(b, ms(till - now))
  return s
end

-- figures: the most a request could have at once (0 while a booking lies
-- ahead), and the µs until the last entry leaves the window. After trim every
-- entry is in (now - Window, now] once none lies ahead.
function M.sl.figures(b)
  local k, last, max, W = b.k, b.last, b.a1, b.a2
  --{ sl.figures: left and reset for a log of k entries in the window
  local left, reset = max, 0
  if k > 0 then
    reset = last + W - now
    if reset < 0 then reset = 0 end
    left = 0
    if last <= now then left = max - k end
    if left < 0 then left = 0 end
  end
  --}
  return left, reset
end

function M.sl.istail(b, handle) return b.last == handle end
function M.sl.has(b, handle) return b.last ~= nil and b.last > now and handle <= b.last end

-- rollback takes up to n entries equal to t off the log, the last ones, and
-- puts as many stand-ins at its front, each at or after every entry the log
-- dropped, so that those still count: the first entry (everything dropped is
-- at or before it), or t - Window if that is earlier and no entry comes after
-- t. (Then every grant that stands is at or before t; those after t - Window
-- share the window ending at t, so there are at most Max - n of them, and the
-- log still holds at least that many entries after t - Window.) Entries only
-- move earlier, so the log is never stricter than before.
function M.sl.rollback(b, n, t)
  if b.k == 0 then return end
  local first = tonumber(redis.call("LINDEX", b.key, 0))
  local tail = b.last == t
  local m = redis.call("LREM", b.key, -n, t)
  if m == 0 then return end
  local pad = first
  if tail and t - b.a2 < pad then pad = t - b.a2 end
  if pad > now - b.a2 then -- else no window that matters holds it: as trim
    pushfront(b.key, m, pad)
  else
    b.k = b.k - m
  end
  b.last = tonumber(redis.call("LINDEX", b.key, -1))
  if not b.last or b.last + b.a2 <= now then
    redis.call("DEL", b.key)
    b.k, b.last = 0, nil
  else
    expire(b, ms(b.last + b.a2 - now))
  end
end

-- a hole nobody took comes out of the log as a rollback would take it.
function M.sl.release(b, n, t) M.sl.rollback(b, n, t) end

-- settle: the booking's entries are at its slot t (a grant from a hole's
-- too). Less comes out of the log as a rollback takes it; more goes in
-- at the booking's time t (after the entries at t, before later ones), if a
-- window that still matters (after now - Window) holds t; the log keeps its
-- newest Max.
function M.sl.settle(b, used, _, _, t)
  local n, W = b.n, b.a2
  if used < n then
    M.sl.rollback(b, n - used, t)
    return
  end
  if t <= now - W then return end
  local k = used - n
  if k > b.a1 then k = b.a1 end
  local empty = b.k == 0
  local later = {}
  while b.k > 0 and tonumber(redis.call("LINDEX", b.key, -1)) > t do
    later[#later + 1] = redis.call("RPOP", b.key)
    b.k = b.k - 1
  end
  local c = k
  while c > 0 do
    local chunk = {}
    for x = 1, math.min(c, 1000) do chunk[x] = t end
    redis.call("RPUSH", b.key, unpack(chunk))
    c = c - #chunk
  end
  for i = #later, 1, -1 do redis.call("RPUSH", b.key, later[i]) end
  b.k = redis.call("LLEN", b.key)
  if b.k > b.a1 then
    redis.call("LTRIM", b.key, b.k - b.a1, -1)
    b.k = b.a1
  end
  b.last = tonumber(redis.call("LINDEX", b.key, -1))
  if empty then
    local g = W
    if g > 1000000 then g = 1000000 end
    expire(b, ms(t - t % g + g + W - now)) -- as commit's sl.till
  end
end

function M.sl.holetill(_, at) return at + 1 end

-- hold: the marker, which cooldown.lua writes, is the hold.
function M.sl.hold(b, till)
  if till > b.hold then b.hold = till end
end
