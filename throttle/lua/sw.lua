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
  local s = 0
  for j, c in pairs(b.count) do
    if j > bb - b.a3 and j <= bb then s = s + c end
  end
  local i = #args
  args[i + 1], args[i + 2], args[i + 3], args[i + 4] = "s", s, "o", at(b, bb - b.a3)
  args[i + 5], args[i + 6], args[i + 7], args[i + 8] = "c", at(b, bb), "d", at(b, bb - b.a3 + 1)
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
  local L, S = b.a2, b.a3
  local lower = now
  if b.b and b.b * L > lower then lower = b.b * L end
  if b.hold > lower then lower = b.hold end
  local j0 = floordiv(lower, L)
  local j, full = j0, 0
  for i, c in pairs(b.count) do
    if i > j - S and i <= j then full = full + c end
  end
  while true do
    local old, r = at(b, j - S), b.a1 - b.n - full
    if r >= 0 then
      local off = 0
      if j == j0 then off = lower - j * L end
      if old > r then
        local o = ceildiv(L * (old - r), old)
        if o > off then off = o end
      end
      if off < L then return j * L + off end
    end
    full = full + at(b, j + 1) - at(b, j - S + 1)
    j = j + 1
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
  local L, S = b.a2, b.a3
  local left = 0
  local s = floordiv(now, L)
  if b.b <= s then
    local f = 0
    for i, c in pairs(b.count) do
      if i > s - S and i <= s then f = f + c end
    end
    left = b.a1 - f - ceildiv(at(b, s - S) * (L - (now - s * L)), L)
    if left < 0 then left = 0 end
  end
  local e = b.b * L
  for i in pairs(b.count) do
    if (i + S + 1) * L > e then e = (i + S + 1) * L end
  end
  if b.hold > e then e = b.hold end
  local reset = e - now
  if reset < 0 then reset = 0 end
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

function M.sw.holetill(b, t) return (floordiv(t, b.a2) + 1) * b.a2 end

function M.sw.hold(b, till)
  if till > b.hold then
    b.hold = till
    swput(b)
  end
end
