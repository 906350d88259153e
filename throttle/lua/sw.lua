-- sw.lua: the sliding window counter (SlidingWindow). a1 = Max, a2 = L, a
-- slot's length in µs, a3 = S, slots per window; slot j runs from j·L to
-- (j+1)·L. At t in slot s the window (t - S·L, t] is estimated as
--   est(t) = count[s-S+1 .. s] + count[s-S] · (1 - (t - s·L) / L)
-- and n is granted at the earliest t >= max(now, start of the latest booked
-- slot) with est(t) + n <= Max, to the µs: in slot s that is
--   full + n <= Max  and  old · (L - (t - s·L)) <= (Max - n - full) · L
-- with full = count[s-S+1 .. s] and old = count[s-S]. est only falls as t
-- moves past the latest booked slot, so any later t is granted too.
--
-- KEYS: a hash {b = latest booked slot, L, h = a cooldown's end (0: none),
-- x = 1 while the bucket has holes, <slot index> = count (only counts other
-- than 0, for slots b-S .. b), and a summary of them for reserve_sw.lua's
-- fast path: s = count[b-S+1 .. b], o = count[b-S], c = count[b],
-- d = count[b-S+1]}, expiring at the end of slot b+S. Every write of counts
-- or b writes the summary with them (a hash without one is served by the
-- slow path, which writes it).
--
-- The arithmetic reserve_sw.lua shares is marked as fragments (--{ name
-- ... --}; internal/luagen), over local variables: max = Max, L and S, n
-- the tokens of a call, hold the cooldown's end.

M.sw = {}

function M.sw.load(b)
  local hh = redis.call("HGETALL", b.key)
  local bb, hl
  b.hold, b.h, b.count, b.fields, b.len = 0, false, {}, {}, #hh
  for i = 1, #hh, 2 do
    local f, v = hh[i], hh[i + 1]
    if f == "b" then bb = tonumber(v)
    elseif f == "L" then hl = tonumber(v)
    elseif f == "h" then b.hold = tonumber(v)
    elseif f == "x" then b.h = v == "1"
    end
  end
  b.fresh = bb == nil or hl ~= b.a2 -- no state, or a changed slot length
  if b.fresh then
    bb = nil
  else
    for i = 1, #hh, 2 do
      local j = tonumber(hh[i])
      if j then b.count[j], b.fields[j] = tonumber(hh[i + 1]), hh[i] end
    end
  end
  b.b = bb
end

local function at(b, j) return b.count[j] or 0 end

-- summary appends the fields s, o, c and d (above) for the latest booked slot
-- bb to the HSET arguments args.
local function summary(b, bb, args)
  local count, S = b.count, b.a3
  --{ sw.summary: the fields s, o, c and d for the latest booked slot bb,
  -- appended to the HSET arguments args; count holds the counts by slot
  local sum = 0
  for i, x in pairs(count) do
    if i > bb - S and i <= bb then sum = sum + x end
  end
  local a = #args
  args[a + 1], args[a + 2], args[a + 3], args[a + 4] = "s", sum, "o", count[bb - S] or 0
  args[a + 5], args[a + 6], args[a + 7], args[a + 8] = "c", count[bb] or 0, "d", count[bb - S + 1] or 0
  --}
  return args
end

local function swput(b)
  if b.fresh and b.len > 0 then redis.call("DEL", b.key) end
  b.fresh, b.len = false, 1
  local bb = b.b or floordiv(now, b.a2)
  local x = 0
  if b.h then x = 1 end
  redis.call("HSET", b.key, unpack(summary(b, bb, {"b", bb, "L", b.a2, "h", b.hold, "x", x})))
  local till = (bb + b.a3 + 1) * b.a2
  for j in pairs(b.count) do
    if (j + b.a3 + 1) * b.a2 > till then till = (j + b.a3 + 1) * b.a2 end
  end
  if b.hold > till then till = b.hold end
  expire(b, ms(till - now))
end

function M.sw.flag(b, on)
  if b.h ~= on then
    b.h = on
    swput(b)
  end
end

function M.sw.tail(b)
  local L, S, max, n, bb, hold = b.a2, b.a3, b.a1, b.n, b.b, b.hold
  --{ sw.lower: lower, the earliest instant a call may book: now, not
  -- before the latest booked slot bb (if any) starts or the cooldown ends
  local lower = now
  if bb and bb * L > lower then lower = bb * L end
  if hold > lower then lower = hold end
  --}
  local j = floordiv(lower, L)
  local full, off, e = 0, lower - j * L, nil
  for i, c in pairs(b.count) do
    if i > j - S and i <= j then full = full + c end
  end
  while true do
    local old = at(b, j - S)
    --{ sw.fit: e, the earliest instant in slot j, off or more µs into it,
    -- where n fits (nil if none): full counts slots j-S+1 .. j and old
    -- slot j-S, which weighs by how much of it the window still covers
    local r = max - n - full
    e = nil
    if r >= 0 then
      if old > r then
        local x = L * (old - r)
        local q = ceildiv(x, old)
        if q > off then off = q end
      end
      if off < L then e = j * L + off end
    end
    --}
    if e then return e end
    full = full + at(b, j + 1) - at(b, j - S + 1)
    j, off = j + 1, 0
  end
end

-- commit books n in the slot of s; the handle is the slot.
function M.sw.commit(b, s)
  local j = floordiv(s, b.a2)
  b.count[j] = at(b, j) + b.n
  b.b = j
  if b.fresh and b.len > 0 then redis.call("DEL", b.key) b.len = 0 end
  redis.call("HSET", b.key, j, b.count[j])
  local gone = {}
  for i, f in pairs(b.fields) do
    if i < j - b.a3 then
      gone[#gone + 1] = f
      b.count[i] = nil
    end
  end
  if #gone > 0 then redis.call("HDEL", b.key, unpack(gone)) end
  swput(b)
  return j
end

-- figures: what a request could have at once now (0 while a later slot has
-- bookings), and the µs until a request for Max would be granted at once.
function M.sw.figures(b)
  if not b.b then return b.a1, 0 end
  local L, S, max, hold = b.a2, b.a3, b.a1, b.hold
  local left, reset, cur, top = 0, 0, floordiv(now, L), -1
  if b.b <= cur then
    local full = 0
    for i, c in pairs(b.count) do
      if i > cur - S and i <= cur then full = full + c end
    end
    local old = at(b, cur - S)
    --{ sw.left: left, what a call could have at once in now's slot cur:
    -- full counts slots cur-S+1 .. cur and old slot cur-S
    local x = old * (L - (now - cur * L))
    local q = ceildiv(x, L)
    left = max - full - q
    if left < 0 then left = 0 end
    --}
  end
  for i in pairs(b.count) do
    if i > top then top = i end
  end
  local bb = b.b
  --{ sw.reset: reset, the µs until a call for Max would be granted at
  -- once: when slot top, the latest with a count (-1: none), has left the
  -- window, not before the latest booked slot bb starts or the cooldown
  -- ends
  local till = bb * L
  if top >= 0 and (top + S + 1) * L > till then till = (top + S + 1) * L end
  if hold > till then till = hold end
  reset = till - now
  if reset < 0 then reset = 0 end
  --}
  return left, reset
end

function M.sw.istail(b, handle) return b.b == handle end
function M.sw.has(b, handle) return b.b ~= nil and handle <= b.b end

-- rollback takes n off the slot's count, if the key still keeps that slot;
-- a count that reaches 0 goes.
function M.sw.rollback(b, n, j)
  local c = b.count[j]
  if b.fresh or not c then return end
  c = c - n
  if c > 0 then
    b.count[j] = c
    redis.call("HSET", b.key, unpack(summary(b, b.b, {j, c})))
  else
    b.count[j] = nil
    redis.call("HDEL", b.key, b.fields[j] or j)
    redis.call("HSET", b.key, unpack(summary(b, b.b, {})))
  end
end

-- a hole nobody took by the end of its slot is uncounted, as a rollback.
function M.sw.release(b, n, j) M.sw.rollback(b, n, j) end

-- settle: the booking's slot is its slot's (a grant from a hole too). Less
-- comes off its count (a rollback); more goes on it, if
-- the key still keeps the slot (else no window that matters holds it).
function M.sw.settle(b, used, _, _, slot)
  local n, j = b.n, floordiv(slot, b.a2)
  if used < n then
    M.sw.rollback(b, n - used, j)
    return
  end
  if b.fresh or not b.b or j < b.b - b.a3 then return end
  local c = at(b, j) + used - n
  b.count[j] = c
  redis.call("HSET", b.key, unpack(summary(b, b.b, {j, c})))
end

function M.sw.holetill(b, t) return (floordiv(t, b.a2) + 1) * b.a2 end

function M.sw.hold(b, till)
  if till > b.hold then
    b.hold = till
    swput(b)
  end
end
