-- cw.lua: the calendar window (FixedWindow with a Calendar unit): days, ISO
-- weeks or months in a zone, whose boundaries the client computes with Go's
-- time package (a day may be 23 or 25 hours, a month 28 to 31 days). a1 =
-- Max; a2, a3, a4 = the starts (µs) of the window that held now on the
-- client's reading of the clock, of the next one and of the one after. The
-- state is fw.lua's cursor, named by its window's start: w, the start of the
-- latest window anything is booked in, e its end, c its count. A request
-- goes in the cursor's window if it fits there, else in the next one if its
-- end is known, else it is refused until the cursor's window ends.
--
-- Around a boundary the store's clock may be in the window before the ones
-- given (a client clock ahead): the call is refused until a2, a moment
-- away. A store clock past a4 (a client clock behind by a whole window) is
-- an error. A booking pushed past the known windows by another bucket of
-- the call (say a month's quota stacked on a day's) goes in a window not
-- yet known, named by its slot (e = 0) until a call knows its bounds;
-- meanwhile every booking at or after its slot counts in it, which may
-- refuse a request that would fit, never grant one that would not.
--
-- KEYS: a hash {w, e, c, h = a cooldown's end (µs, 0: none), x = 1 while
-- the bucket has holes}, expiring when the cursor's window (or the cooldown)
-- ends.

M.cw = {}

function M.cw.load(b)
  local st = redis.call("HMGET", b.key, "w", "e", "c", "h", "x")
  local b0, b1, b2 = b.a2, b.a3, b.a4
  if now >= b2 then
    return error("sluice: calendar window: the store's clock is a window past the client's; check the hosts' clocks")
  end
  b.stale = now < b0
  if now < b1 then b.cs, b.ce, b.ne = b0, b1, b2 else b.cs, b.ce, b.ne = b1, b2, nil end
  local w, e, c = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
  if w and e == 0 and w >= b0 then -- a window not known when it was booked
    if w < b1 then w, e = b0, b1 elseif w < b2 then w, e = b1, b2 end
  end
  b.fresh = not (w and e and c and ((w == b0 and e == b1) or (w == b1 and e == b2) or (e == 0 and w >= b2)))
  if b.fresh or w < b.cs then w, e, c = b.cs, b.ce, 0 end
  b.w, b.we, b.c = w, e, c
  b.hold = tonumber(st[4]) or 0
  b.h = st[5] == "1"
end

local function cwput(b)
  local till = b.we
  if till == 0 then till = b.w + 2 * (b.a4 - b.a3) end
  if b.hold > till then till = b.hold end
  local x = 0
  if b.h then x = 1 end
  redis.call("HSET", b.key, "w", b.w, "e", b.we, "c", b.c, "h", b.hold, "x", x)
  expire(b, ms(till - now))
  b.fresh = false
end

function M.cw.flag(b, on)
  if b.h ~= on then
    b.h = on
    cwput(b)
  end
end

-- tail: the cursor's window's start if n fits there, else the next one's if
-- its end is known; not before now or the cooldown's end.
function M.cw.tail(b)
  if b.stale then return nil, b.a2 - now end
  local e = b.w
  if b.c + b.n > b.a1 then
    if b.w ~= b.cs or b.ne == nil then
      local r = b.we
      if r == 0 then r = b.w end
      return nil, r - now
    end
    e = b.ce
  end
  if e < now then e = now end
  if b.hold > e then e = b.hold end
  return e
end

-- cwwin is the window of t >= the cursor's start: the cursor's, a known
-- one, or one not yet known, named by t (e = 0).
local function cwwin(b, t)
  if t < b.w or b.we == 0 or t < b.we then return b.w, b.we end
  if t < b.a3 then return b.a2, b.a3 end
  if t < b.a4 then return b.a3, b.a4 end
  return t, 0
end

-- commit books n in the window of s. The handle is the window's start.
function M.cw.commit(b, s)
  local ws, we = cwwin(b, s)
  if ws == b.w then
    b.c = b.c + b.n
  else
    b.w, b.we, b.c = ws, we, b.n
  end
  cwput(b)
  return ws
end

-- figures: what the window of now has left, and the time until a request
-- for Max would be granted at once.
function M.cw.figures(b)
  local left = 0
  if not b.stale and b.w == b.cs and b.c < b.a1 then left = b.a1 - b.c end
  local reset = b.w
  if b.c > 0 and b.we ~= 0 then reset = b.we end
  if b.hold > reset then reset = b.hold end
  reset = reset - now
  if reset < 0 then reset = 0 end
  return left, reset
end

function M.cw.istail(b, handle) return b.w == handle end
function M.cw.has(b, handle) return not b.fresh and handle <= b.w end

function M.cw.rollback(b, n)
  b.c = b.c - n
  if b.c < 0 then b.c = 0 end
  cwput(b)
end

function M.cw.release() end

-- settle: the booking's window is its slot's (a grant from a hole too).
-- Less comes off the count if that window is still the cursor's; more goes
-- on the cursor's, and past Max on to the next window if the cursor's is the
-- window of now and the next one is known.
function M.cw.settle(b, used, _, _, slot)
  local n, max = b.n, b.a1
  if used < n then
    if b.fresh or slot < b.w or (b.we ~= 0 and slot >= b.we) then return end
    b.c = b.c - (n - used)
    if b.c < 0 then b.c = 0 end
  else
    b.c = b.c + used - n
    if b.c > max and b.w == b.cs and b.ne then
      b.w, b.we, b.c = b.ce, b.ne, b.c - max
    end
  end
  cwput(b)
end

-- holetill: a hole lasts until its window ends (at once, in a window not
-- yet known).
function M.cw.holetill(b, at)
  if at < b.a3 then return b.a3 end
  if at < b.a4 then return b.a4 end
  return at
end

function M.cw.hold(b, till)
  if till > b.hold then
    b.hold = till
    cwput(b)
  end
end
