-- tat.lua: the state shared by the token bucket (tb.lua) and the leaky bucket
-- (lb.lua): one string key holding the TAT, the time in µs at which the
-- bucket has caught up with everything booked (GCRA's theoretical arrival
-- time), negated while the bucket has holes. At or before now it means an
-- idle (full) bucket, and the key is deleted; otherwise it expires at the TAT.
-- a1 is T, the µs per token.

local TAT = {}

function TAT.load(b)
  local v = tonumber(redis.call("GET", b.key))
  b.h = false
  if v and v < 0 then b.h, v = true, -v end
  if not v or v < now then v = now end
  b.tat = v
end

function TAT.put(b)
  if b.tat <= now and not b.h then
    redis.call("DEL", b.key)
    return
  end
  local v = b.tat
  if b.h then v = -v end
  redis.call("SET", b.key, v, "PX", ms(b.tat - now))
  if b.h then redis.call("PEXPIRE", b.hkey, ms(b.tat - now)) end
end

function TAT.flag(b, on)
  if b.h ~= on then
    b.h = on
    TAT.put(b)
  end
end

-- commit books n at s: the TAT moves to max(TAT, s) + n·T, so a turn taken
-- later than the bucket alone needed (another bucket of the call was slower)
-- is counted where it is used. The handle is the TAT before, so that a
-- rollback restores it exactly.
function TAT.commit(b, s)
  local before, t = b.tat, b.tat
  if s > t then t = s end
  b.tat = t + b.n * b.a1
  TAT.put(b)
  return before
end

-- after is the TAT a booking of n at slot left, from its handle (the TAT before).
local function tatafter(b, handle, slot, n)
  if slot > handle then handle = slot end
  return handle + n * b.a1
end

function TAT.istail(b, handle, slot) return b.tat == tatafter(b, handle, slot, b.n) end

-- has: the reservation with this handle is still counted in the state.
function TAT.has(b, handle) return b.tat > now and handle <= b.tat end

-- rollback gives back the latest booking: the TAT goes back to what it was
-- before it (its handle), never before floor (now, or where a cooldown put
-- it); then each hole left at the tail, untouched, folds back the same way.
function TAT.rollback(b, n, handle, floor)
  local t = handle
  while t > floor do
    local fold = nil
    for _, h in ipairs(b.holes) do
      if h.n == h.n0 and tatafter(b, h.handle, h.at, h.n0) == t then fold = h break end
    end
    if not fold then break end
    H.drop(b, fold)
    t = fold.handle
  end
  if t < floor then t = floor end
  b.tat = t
  TAT.put(b)
end

function TAT.release() end

-- a turn of a TAT bucket is an instant: moved later, it could land on the next one.
function TAT.holetill(_, at) return at + 1 end
