-- fw.lua: the fixed window (FixedWindow). a1 = Max, a2 = W, the window in µs;
-- window i runs from i·W to (i+1)·W. The state is the cursor: the latest
-- window anything is booked in (w) and its count (c). A request goes in the
-- cursor's window if it fits there, else in the next one, so requests line
-- up window by window; it waits until its window starts.
--
-- KEYS: a hash {w, c, W, h = a cooldown's end (µs, 0: none), x = 1 while the
-- bucket has holes}, expiring when the cursor's window (or the cooldown) ends.
--
-- The arithmetic the lean script reserve_fw.lua shares is marked as
-- fragments (--{ name ... --}; internal/luagen), over local variables: w
-- and c the cursor, n the tokens of a call, max = Max, W = W, hold the
-- cooldown's end, cur the window of now.

M.fw = {}

function M.fw.load(b)
  local st = redis.call("HMGET", b.key, "w", "c", "W", "h", "x")
  local cur = floordiv(now, b.a2)
  local w, c = tonumber(st[1]), tonumber(st[2])
  b.fresh = w == nil or c == nil or tonumber(st[3]) ~= b.a2
  if b.fresh or w < cur then w, c = cur, 0 end -- no state, a changed window, or the cursor's has ended
  b.w, b.c, b.cur = w, c, cur
  b.hold = tonumber(st[4]) or 0
  b.h = st[5] == "1"
end

local function fwput(b)
  local till = (b.w + 1) * b.a2
  if b.hold > till then till = b.hold end
  local x = 0
  if b.h then x = 1 end
  redis.call("HSET", b.key, "w", b.w, "c", b.c, "W", b.a2, "h", b.hold, "x", x)
  expire(b, ms(till - now))
  b.fresh = false
end

function M.fw.flag(b, on)
  if b.h ~= on then
    b.h = on
    fwput(b)
  end
end

function M.fw.tail(b)
  local w, c, n, max, W, hold = b.w, b.c, b.n, b.a1, b.a2, b.hold
  --{ fw.tail: e, the earliest instant for n: the cursor's window's start
  -- if n fits there, else the next one's, not before now or the cooldown's
  -- end
  local e = w * W
  if c + n > max then e = e + W end
  if e < now then e = now end
  if hold > e then e = hold end
  --}
  return e
end

-- commit books n in the window of s: the cursor's (it fits there, or s would
-- be later) or a later, empty one. The handle is the window.
function M.fw.commit(b, s)
  local w, c, n = b.w, b.c, b.n
  local ws = floordiv(s, b.a2)
  --{ fw.book: n booked in window ws, the cursor's or a later one
  if ws == w then c = c + n else w, c = ws, n end
  --}
  b.w, b.c = w, c
  fwput(b)
  return ws
end

-- figures: what the current window has left (nothing once bookings went past
-- it), and the time until a request for Max would be granted at once.
function M.fw.figures(b)
  local w, c, cur, max, W, hold = b.w, b.c, b.cur, b.a1, b.a2, b.hold
  --{ fw.figures: left, what the current window has left, and reset, the
  -- µs until a call for Max would be granted at once
  local left = 0
  if w == cur and c < max then left = max - c end
  local reset = w * W
  if c > 0 then reset = reset + W end
  if hold > reset then reset = hold end
  reset = reset - now
  if reset < 0 then reset = 0 end
  --}
  return left, reset
end

function M.fw.istail(b, handle) return b.w == handle end
function M.fw.has(b, handle) return not b.fresh and handle <= b.w end

-- rollback: a booking in the cursor's window comes off its count.
function M.fw.rollback(b, n)
  b.c = b.c - n
  if b.c < 0 then b.c = 0 end
  fwput(b)
end

-- a hole's window has ended: nothing to uncount.
function M.fw.release() end

-- settle: the booking's window is its slot's (a grant from a hole too).
-- Less comes off the count if that window is still the cursor's; more goes on the cursor's window, and past Max on to the
-- windows after it, each full (no further than 10^14 µs ahead), so that the
-- next grants pay for it.
function M.fw.settle(b, used, _, _, slot)
  local n, max = b.n, b.a1
  if used < n then
    if b.fresh or floordiv(slot, b.a2) ~= b.w then return end
    b.c = b.c - (n - used)
    if b.c < 0 then b.c = 0 end
  else
    local w, c = b.w, b.c + used - n
    if c > max then
      local q = math.floor((c - 1) / max)
      local most = floordiv(now + 1e14, b.a2) - w
      if q > most then q = most end
      w, c = w + q, c - q * max
    end
    b.w, b.c = w, c
  end
  fwput(b)
end

function M.fw.holetill(b, at) return (floordiv(at, b.a2) + 1) * b.a2 end

function M.fw.hold(b, till)
  if till > b.hold then
    b.hold = till
    fwput(b)
  end
end
