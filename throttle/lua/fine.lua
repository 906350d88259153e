-- fine.lua: token (tf) and leaky (lf) buckets faster than one token per µs
-- (fine.go). a1 = T in ticks of a picosecond (F.q per µs), a2 = burst or
-- capacity. The key holds the TAT as µs with six decimals, "W.FFFFFF"; a
-- call reads it as b.rel, ticks after now (0 when it is past), and every sum
-- stays below 2^53 because nothing is booked more than F.horizon ticks ahead.
-- A booking at slot s (whole µs) is made at the earliest tick that rounds up
-- to s; its handle is the TAT before, in ticks after s, plus F.bias. No holes:
-- has is false, so a cancelled turn under later ones comes back to nobody.

local F = {q = 1000000, horizon = 2 ^ 51, bias = 2 ^ 52}

-- tick is µs instant x in ticks after now; up, ticks r as µs rounded up.
function F.tick(x) return (x - now) * F.q end
function F.up(r)
  if r <= 0 then return 0 end
  return ceildiv(r, F.q)
end

function F.load(b)
  b.rel, b.h = 0, false
  local v = redis.call("GET", b.key)
  if v then
    local w, f = string.match(v, "^(%d+)%.(%d+)$")
    w, f = tonumber(w), tonumber(f)
    if w and w >= now then b.rel = (w - now) * F.q + f end
  end
end

function F.put(b)
  if b.rel <= 0 then
    redis.call("DEL", b.key)
    return
  end
  local w = floordiv(b.rel, F.q)
  local v = fmt(now + w) .. "." .. string.format("%06d", b.rel - w * F.q)
  redis.call("SET", b.key, v, "PX", ms(F.up(b.rel)))
end

function F.commit(b, s)
  local before = b.rel
  local base = F.tick(s) - F.q + 1
  if b.rel > base then base = b.rel end
  b.rel = base + b.n * b.a1
  F.put(b)
  return before - F.tick(s) + F.bias
end

-- istail keeps the TAT before the booking for rollback, which only follows it.
function F.istail(b, handle, slot)
  b.before = handle - F.bias + F.tick(slot)
  local base = F.tick(slot) - F.q + 1
  if b.before > base then base = b.before end
  return b.rel == base + b.n * b.a1
end

function F.has() return false end
function F.flag() end
function F.release() end
function F.holetill(_, at) return at + 1 end
function F.nextturn(_, at) return at end

-- floor is the earliest the TAT may be put back to: now, or what a cooldown holds.
function F.floor(b, leaky)
  local c = cooldown(b)
  if c == 0 then return 0 end
  local x = F.tick(c)
  if not leaky then x = x + (b.a2 - 1) * b.a1 end
  if x > F.horizon then x = F.horizon end
  return x
end

function F.rollback(b, leaky)
  local x = F.floor(b, leaky)
  if b.before > x then x = b.before end
  b.rel = x
  F.put(b)
end

function F.hold(b, till, leaky)
  local x = F.tick(till)
  if not leaky then x = x + (b.a2 - 1) * b.a1 end
  if x > F.horizon then x = F.horizon end
  if x > b.rel then
    b.rel = x
    F.put(b)
  end
end

-- module is what the token (leaky false) and leaky fine buckets share; each
-- adds its tail and figures.
function F.module(leaky)
  return {
    load = F.load, flag = F.flag, commit = F.commit, istail = F.istail, has = F.has,
    release = F.release, holetill = F.holetill, nextturn = F.nextturn,
    rollback = function(b) F.rollback(b, leaky) end,
    hold = function(b, till) F.hold(b, till, leaky) end,
  }
end

M.tf = F.module(false)

function M.tf.tail(b)
  local need = b.n * b.a1
  if b.rel + need > F.horizon then return nil, F.up(b.rel + need - F.horizon) end
  return now + F.up(b.rel + need - b.a2 * b.a1)
end

function M.tf.figures(b)
  local left = floordiv(b.a2 * b.a1 - b.rel, b.a1)
  if left < 0 then left = 0 end
  return left, F.up(b.rel)
end

M.lf = F.module(true)

function M.lf.tail(b, maxwait)
  local over = b.rel + (b.n - b.a2) * b.a1
  if over > 0 then
    if maxwait < 0 or F.up(b.rel) <= maxwait then return nil, F.up(over) end
    return nil, F.up(b.rel)
  end
  return now + F.up(b.rel)
end

function M.lf.figures(b)
  local left = b.a2 - ceildiv(b.rel, b.a1)
  if left < 0 then left = 0 end
  return left, F.up(b.rel)
end
