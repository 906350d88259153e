-- holes.lua: cancelled turns, offered to later callers.
--
-- A reservation cancelled while later ones stand on it cannot move the
-- bucket's state back without moving theirs. Its turn becomes a hole: n units
-- that a later request may take at any time in [at, till), where till is the
-- end of the span in which a grant at `at` may be moved (the module's
-- holetill: the same instant for token and leaky buckets and the sliding log,
-- the rest of the window or slot for the window counters). A request served
-- from a hole is granted exactly what was given back, within that span, so
-- the grants that stand are those the policy already admitted: its promise
-- holds. A hole nobody takes by `till` is released to the module (the window
-- policies then uncount it; the token and leaky buckets keep the time, which
-- only wastes it).
--
-- KEYS: the bucket's holes key, a sorted set scored by till, members
-- "at:till:n:n0:handle.hf:id" (n left of n0 given back; handle.hf the
-- reservation's module handle, its two integers, 0.0 for a turn that was
-- itself taken from a hole, which is not released). A member of another
-- form (sluice before handles had two integers) is skipped: its turn is
-- lost, as that of a hole nobody takes. At most maxholes per bucket: past
-- that a refund releases at once. The key expires with the bucket's state
-- key (prelude.lua's expire).

local maxholes = 1000

local function parsehole(m)
  local at, till, n, n0, handle, hf = string.match(m, "^(%d+):(%d+):(%d+):(%d+):(%d+)%.(%d+):")
  if not hf then return nil end
  return {at = tonumber(at), till = tonumber(till), n = tonumber(n), n0 = tonumber(n0),
    handle = tonumber(handle), hf = tonumber(hf), m = m}
end

local function holemember(h, id)
  return fmt(h.at) .. ":" .. fmt(h.till) .. ":" .. h.n .. ":" .. h.n0 .. ":" .. fmt(h.handle) .. "." .. fmt(h.hf) .. ":" .. id
end

-- holes are taken and released in one order, which holes.go keeps too:
-- by till, then at, then handle, then n.
local function before(x, y)
  if x.till ~= y.till then return x.till < y.till end
  if x.at ~= y.at then return x.at < y.at end
  if x.handle ~= y.handle then return x.handle < y.handle end
  if x.hf ~= y.hf then return x.hf < y.hf end
  return x.n < y.n
end

-- served is whether hole h was a turn itself taken from a hole (handle 0).
local function served(h) return h.handle == 0 and h.hf == 0 end

-- H.load reads b's live holes into b.holes. Unless readonly, it first
-- releases and removes those whose span is over.
function H.load(b, readonly)
  b.holes = {}
  if not b.h then return end
  if readonly then
    for _, m in ipairs(redis.call("ZRANGEBYSCORE", b.hkey, "(" .. fmt(now), "+inf")) do
      local h = parsehole(m) -- nil: not a hole (tb.lua's p, or an old form)
      if h then b.holes[#b.holes + 1] = h end
    end
    return
  end
  local gone = redis.call("ZRANGEBYSCORE", b.hkey, "-inf", fmt(now))
  if #gone > 0 then
    local hs = {}
    for _, m in ipairs(gone) do
      local h = parsehole(m)
      if h then hs[#hs + 1] = h end
    end
    table.sort(hs, before)
    for _, h in ipairs(hs) do
      if not served(h) then M[b.kind].release(b, h.n, h.handle, h.at) end
    end
    redis.call("ZREMRANGEBYSCORE", b.hkey, "-inf", fmt(now))
  end
  for _, m in ipairs(redis.call("ZRANGE", b.hkey, 0, -1)) do
    local h = parsehole(m)
    if h then b.holes[#b.holes + 1] = h end
  end
  if #b.holes == 0 then M[b.kind].flag(b, false) end
end

-- H.best is the earliest time at or after t at which a hole of b serves b.n,
-- and the hole; nil if none does.
function H.best(b, t)
  local best, hole = nil, nil
  for _, h in ipairs(b.holes) do
    if h.n >= b.n then
      local x = h.at
      if x < t then x = t end
      if x < h.till and (best == nil or x < best or (x == best and before(h, hole))) then best, hole = x, h end
    end
  end
  return best, hole
end

-- H.take serves b.n from hole h and returns the grant's handle (two
-- integers): 0 0 for a window's, the turn's instant for a token or leaky
-- bucket's (the module's fromhole). What is left of the hole starts where
-- the module moves it (a leaky bucket's next turn is b.n·T later).
function H.take(b, h)
  redis.call("ZREM", b.hkey, h.m)
  local hw, hf = 0, 0
  local fromhole = M[b.kind].fromhole
  if fromhole then hw, hf = fromhole(b, h, b.n) end
  h.n = h.n - b.n
  if h.n > 0 then
    local id = string.match(h.m, ":([^:]*)$")
    h.m = holemember(h, id)
    redis.call("ZADD", b.hkey, fmt(h.till), h.m)
  elseif #b.holes == 1 then
    M[b.kind].flag(b, false)
  end
  return hw, hf
end

-- H.add makes a hole of a cancelled turn of n at `at` with b's module
-- handle (handle, hf).
function H.add(b, n, at, handle, hf, id)
  local till = M[b.kind].holetill(b, at)
  if till <= now or redis.call("ZCARD", b.hkey) >= maxholes then
    if handle ~= 0 or hf ~= 0 then M[b.kind].release(b, n, handle, at) end
    return
  end
  local h = {at = at, till = till, n = n, n0 = n, handle = handle, hf = hf}
  redis.call("ZADD", b.hkey, fmt(till), holemember(h, id))
  -- The holes key lasts as long as the state (see expire in prelude.lua).
  local ttl = redis.call("PTTL", b.key)
  if ttl < ms(till - now) then ttl = ms(till - now) end
  redis.call("PEXPIRE", b.hkey, ttl)
  b.holes[#b.holes + 1] = h
  M[b.kind].flag(b, true)
end

-- The holes key of a token or leaky bucket also keeps member "p", not a
-- hole: scored by the latest slot of a booking that may lie nearer the TAT
-- than a settle counts on (tat.lua's TAT.settle and TAT.near), dropped with
-- the holes whose span is over once that slot has passed. Read and written
-- with the commands holes need (docs/redis-deployment.md's ACL): ZRANGE,
-- and ZADD GT.

-- H.near is the slot member p records, 0: none.
function H.near(b)
  local r = redis.call("ZRANGE", b.hkey, 0, -1, "WITHSCORES")
  for i = 1, #r, 2 do
    if r[i] == "p" then return tonumber(r[i + 1]) end
  end
  return 0
end

-- H.setnear records slot s in member p, if later than the one it holds; the
-- key lasts at least until s.
function H.setnear(b, s)
  redis.call("ZADD", b.hkey, "GT", s, "p")
  local ttl = redis.call("PTTL", b.hkey)
  if ttl < ms(s - now) then redis.call("PEXPIRE", b.hkey, ms(s - now)) end
end

-- H.drop removes hole h (a module folding it back into its state).
function H.drop(b, h)
  redis.call("ZREM", b.hkey, h.m)
  for i, x in ipairs(b.holes) do
    if x == h then table.remove(b.holes, i) break end
  end
  if #b.holes == 0 then M[b.kind].flag(b, false) end
end

-- H.clear releases every hole of b: a cooldown voids the turns they offered.
function H.clear(b)
  table.sort(b.holes, before)
  for _, h in ipairs(b.holes) do
    if not served(h) then M[b.kind].release(b, h.n, h.handle, h.at) end
  end
  if #b.holes > 0 then
    local p = H.near(b)
    redis.call("DEL", b.hkey)
    if p > 0 then H.setnear(b, p) end
    b.holes = {}
    M[b.kind].flag(b, false)
  end
end
