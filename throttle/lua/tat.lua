-- tat.lua: the state shared by the token bucket (tb.lua) and the leaky bucket
-- (lb.lua): one string key holding the TAT, the instant at which the bucket
-- has caught up with everything booked (GCRA's theoretical arrival time),
-- exactly: b.tw µs and b.tf picoseconds (int.lua's pairs; tat.go). The key
-- holds "W.FFFFFF" (µs and six digits of picoseconds), or "W" when there are
-- no picoseconds (as sluice wrote every TAT before it kept picoseconds: such
-- a key reads as the same instant), negated while the bucket has holes; a
-- value of any other form reads as none (an idle bucket). At or before now
-- it means an idle (full) bucket, and the key is deleted; otherwise it
-- expires at the TAT. a1 and a4 are T, the time per token: µs and
-- picoseconds.
--
-- The arithmetic the lean script reserve_tat.lua shares is marked as
-- fragments (--{ name ... --}; internal/luagen): Lua over local variables,
-- tw and tf the TAT, Tw and Tf its T, burst its size (a leaky bucket's
-- capacity), n the tokens of a call.

local TAT = {}

-- TAT.parse reads a key's value: whether the bucket has holes, and the TAT
-- (nil for a value of another form).
function TAT.parse(v)
  --{ tat.parse: the value v as w µs and f picoseconds, w nil (or f) for a
  -- value of another form and negative while the bucket has holes
  local w, f = nil, 0
  if string.byte(v, -7) == 46 then -- "W.FFFFFF"
    w, f = tonumber(string.sub(v, 1, -8)), tonumber(string.sub(v, -6))
  else
    w = tonumber(v)
  end
  --}
  if not (w and f) then return false, nil, nil end
  if w < 0 then return true, -w, f end
  return false, w, f
end

function TAT.load(b)
  b.h, b.tw, b.tf = false, now, 0
  local v = redis.call("GET", b.key)
  if not v then return end
  local h, w, f = TAT.parse(v)
  b.h = h
  if w and w >= now then b.tw, b.tf = w, f end
end

-- TAT.ahead is the TAT's µs after now, rounded up: a slot's wait.
function TAT.ahead(b)
  local tw, tf, ahead = b.tw, b.tf, nil
  --{ tat.ahead
  ahead = tw - now
  if tf > 0 then ahead = ahead + 1 end
  --}
  return ahead
end

-- TAT.times is g = (burst - n)·T and s = n·T, each µs and picoseconds: a
-- call for n waits for ahead - g, if positive (a token bucket), or finds
-- the bucket over its capacity by as much (a leaky one); a grant moves the
-- TAT on by s.
function TAT.times(b, n)
  local Tw, Tf, burst = b.a1, b.a4, b.a2
  --{ tat.times: every picosecond sum here stays below 2^50, where
  -- floor(x/Q) is exact (int.lua)
  local gw, gf, sw, sf = (burst - n) * Tw, 0, n * Tw, 0
  if Tf > 0 then
    gf, sf = (burst - n) * Tf, n * Tf
    gw, sw = gw + math.floor(gf / Q), sw + math.floor(sf / Q)
    gf, sf = gf % Q, sf % Q
  end
  --}
  return gw, gf, sw, sf
end

-- TAT.over is ahead - g for b.n (TAT.times), rounded up to a whole µs.
function TAT.over(b)
  local tw, tf = b.tw, b.tf
  local gw, gf = TAT.times(b, b.n)
  --{ tat.over: ew = ahead - g, rounded up
  local ew, ef = tw - now - gw, tf - gf
  if ef < 0 then ew, ef = ew - 1, ef + Q end
  if ef > 0 then ew = ew + 1 end
  --}
  return ew
end

-- left is what a bucket of size tokens holds: size - ceil(ahead/T), at
-- least 0 (for a token bucket, floor((burst·T - ahead)/T)).
function TAT.left(b, size)
  local tw, tf, Tw, Tf, burst = b.tw, b.tf, b.a1, b.a4, size
  --{ tat.count: c = ceil(ahead/T), the tokens the bucket holds, or burst
  -- if it holds as many; left, what it could grant at once, is burst - c.
  -- The quotient is estimated in floats, whose error stays under 1e-5
  -- below 2^31, and settled by exact products when it is that close to a
  -- whole number.
  local aw = tw - now
  local x = (aw + tf / Q) / (Tw + Tf / Q)
  local c = burst
  if x < burst + 1 then
    c = math.ceil(x)
    if c - x < 1e-5 or c - x > 1 - 1e-5 then
      local pf = c * Tf
      local pw = c * Tw + math.floor(pf / Q)
      pf = pf % Q
      if pw < aw or (pw == aw and pf < tf) then -- c·T < ahead
        c = c + 1
      else
        pw, pf = pw - Tw, pf - Tf
        if pf < 0 then pw, pf = pw - 1, pf + Q end
        if pw > aw or (pw == aw and pf >= tf) then c = c - 1 end -- (c-1)·T >= ahead
      end
    end
    if c > burst then c = burst end
  end
  --}
  return burst - c
end

function TAT.put(b)
  if (b.tw < now or (b.tw == now and b.tf == 0)) and not b.h then
    redis.call("DEL", b.key)
    return
  end
  local tw, tf = b.tw, b.tf
  --{ tat.value: v, the key's value for the TAT, and ttl, the µs it
  -- matters for (ahead, rounded up)
  local ttl, v = tw - now, tw -- a number below 2^53: Redis writes all its digits
  if tf > 0 then ttl, v = ttl + 1, string.format("%.0f.%06d", tw, tf) end
  --}
  if b.h then
    if tf > 0 then v = "-" .. v else v = -v end
  end
  ttl = ms(ttl)
  redis.call("SET", b.key, v, "PX", ttl)
  if b.h then redis.call("PEXPIRE", b.hkey, ttl) end
end

function TAT.flag(b, on)
  if b.h ~= on then
    b.h = on
    TAT.put(b)
  end
end

-- after is the TAT a booking of n at slot s leaves, from the TAT before it
-- (tw, tf): n·T from the later of that and the earliest instant that rounds
-- up to s (s - 1 µs + 1 ps). A turn taken later than the bucket alone
-- needed (another bucket of the call was slower) is so counted where it is
-- used, and a bucket alone never loses the part of a µs its slot was
-- rounded up by.
local function tatafter(b, tw, tf, s, n)
  local _, _, sw, sf = TAT.times(b, n)
  --{ tat.after: the TAT (tw, tf) after a booking at s that moves it on by
  -- (sw, sf)
  if tw < s - 1 or (tw == s - 1 and tf < 1) then tw, tf = s - 1, 1 end
  tf = tf + sf
  if tf >= Q then tw, tf = tw + sw + 1, tf - Q else tw = tw + sw end
  --}
  return tw, tf
end

-- commit books n at s. The handle is the TAT before (two integers), so that
-- a rollback restores it exactly.
function TAT.commit(b, s)
  local w, f = b.tw, b.tf
  b.tw, b.tf = tatafter(b, w, f, s, b.n)
  TAT.put(b)
  return w, f
end

function TAT.istail(b, handle, slot, hf)
  local w, f = tatafter(b, handle, hf, slot, b.n)
  return b.tw == w and b.tf == f
end

-- has: the reservation with this handle is still counted in the state.
function TAT.has(b, handle, hf)
  if b.tw < now or (b.tw == now and b.tf == 0) then return false end
  return handle < b.tw or (handle == b.tw and hf <= b.tf)
end

-- rollback gives back the latest booking: the TAT goes back to what it was
-- before it (its handle), never before floor (now, or where a cooldown put
-- it: fw µs and ff picoseconds); then each hole left at the tail,
-- untouched, folds back the same way.
function TAT.rollback(b, handle, hf, fw, ff)
  local w, f = handle, hf
  while w > fw or (w == fw and f > ff) do
    local fold = nil
    for _, h in ipairs(b.holes) do
      if h.n == h.n0 then
        local aw, af = tatafter(b, h.handle, h.hf, h.at, h.n0)
        if aw == w and af == f then fold = h break end
      end
    end
    if not fold then break end
    H.drop(b, fold)
    w, f = fold.handle, fold.hf
  end
  if w < fw or (w == fw and f < ff) then w, f = fw, ff end
  b.tw, b.tf = w, f
  TAT.put(b)
end

function TAT.release() end

-- settle charges the booking with this handle at slot, which took b.n, what
-- it really used (settle.lua). More: a booking of the rest at now, the TAT
-- no further than maxSpan (10^14 µs) ahead. Less: while the booking is the
-- latest, the TAT goes back to what a booking of used would have left (a
-- rollback, never before floor: fw µs and ff picoseconds); under later
-- bookings, by at most A - U, A the least the booking's after can be (its
-- slot's instant plus n·T: a settle before may have moved it back) and U
-- the latest instant a later booking's turn may hold: floor, TAT - c·T (c:
-- how many T a turn lies at least behind the TAT its booking leaves) or p
-- (the latest
-- slot of a booking that may lie nearer the TAT than that, 0: none: one a
-- call of several buckets pushed later, or one settled before). Replaying
-- the bookings with used then moves the TAT back by exactly that much. It
-- returns the slot such a booking may now have (0: none), which the module
-- records (TAT.near).
function TAT.settle(b, used, handle, hf, slot, c, p, fw, ff)
  local n = b.n
  if used > n then
    local _, _, kw, kf = TAT.times(b, used - n)
    local w, f = pn(b.tw + kw, b.tf + kf)
    if w >= now + 1e14 then w, f = now + 1e14, 0 end
    b.tw, b.tf = w, f
    TAT.put(b)
    return 0
  end
  local aw, af = tatafter(b, handle, hf, slot, n)
  if b.tw == aw and b.tf == af then
    local w, f = handle, hf
    if used > 0 then w, f = tatafter(b, handle, hf, slot, used) end
    TAT.rollback(b, w, f, fw, ff)
    return slot
  end
  -- under later bookings the booking's after, as a replay would find it
  -- now, may lie before (aw, af): an earlier settle may have moved it
  -- back. It is no earlier than the slot's instant plus n·T.
  aw, af = tatafter(b, 0, 0, slot, n)
  if not TAT.has(b, handle, hf) or b.tw < aw or (b.tw == aw and b.tf < af) then return 0 end
  local uw, uf = fw, ff
  local cw, cf = pmul(b.a1, b.a4, c)
  local xw, xf = pn(b.tw - cw, b.tf - cf)
  if xw > uw or (xw == uw and xf > uf) then uw, uf = xw, xf end
  if p > uw then uw, uf = p, 0 end
  if uw > aw or (uw == aw and uf >= af) then return 0 end
  local gw, gf = pn(aw - uw, af - uf)
  local _, _, kw, kf = TAT.times(b, n - used)
  if kw < gw or (kw == gw and kf < gf) then gw, gf = kw, kf end
  b.tw, b.tf = pn(b.tw - gw, b.tf - gf)
  TAT.put(b)
  if uf > 0 then uw = uw + 1 end
  if slot > uw then uw = slot end
  return uw
end

-- near records that a booking at slot s may lie nearer the TAT than a
-- settle counts on (TAT.settle's p; holes.lua keeps it).
TAT.near = H.setnear

-- instant is when hole h's turn was booked: its handle is the TAT before it,
-- its at its slot (after).
function TAT.instant(h)
  if h.handle < h.at - 1 or (h.handle == h.at - 1 and h.hf < 1) then return h.at - 1, 1 end
  return h.handle, h.hf
end

-- fromhole is the handle of a grant of b.n served from hole h: the turn's
-- instant, as the TAT before a booking at that instant would be. On a token
-- bucket the rest of the hole stays where it is (lb.lua's moves on).
function TAT.fromhole(_, h) return TAT.instant(h) end

-- a turn of a TAT bucket is an instant: moved later, it could land on the next one.
function TAT.holetill(_, at) return at + 1 end
