-- share.lua: the share of one bucket of a reserve call among priority
-- levels and, within each, tenants (throttle.Share; the Go twin is
-- share_memory.go, the law docs/fairness.md and docs/priorities.md).
--
-- A call with a share has two keys after its buckets' and seven arguments
-- after theirs (six per bucket, prelude.lua):
--   KEYS[4k+1]  sorted set: pair → its tag, µs (its virtual clock); a pair
--               is a tenant at a level: the tenant's name at level 3,
--               "\1" .. level .. tenant at another
--   KEYS[4k+2]  hash: "w:"..pair → weight, "d:"..pair → the pair's next
--               come-back place (µs), "W" → the sum of the weights of level
--               3's pairs in the set, "W1", "W2", "W4", "W5" → the other
--               levels', "f" → the floor last used (ppm), "e" → when both
--               keys expire (µs)
--   ARGV        tenant, weight, horizon µs, T (µs per token of the shared
--               bucket), n (tokens the call takes from it), level (1..5),
--               floor (ppm of the rate the levels below the highest keep),
--               the shared bucket's index among the call's buckets (1..k)
--
-- The tags run from the shared bucket's time: now, or the end of its
-- cooldown while it cools down (no one may book it before), so that a
-- cooldown does not let a pair book more than the horizon past its end.
--
-- A pair is in the set while its tag is ahead of now; a level is active
-- while its sum of weights is not 0. Each call first forgets up to 64 pairs
-- whose tags have passed (their weights leave their level's sum). A pair
-- whose tag is more than the horizon ahead of the bucket's time is over its
-- share: the call books nothing and answers the pair's next come-back place
-- (at least tag - horizon, when its share has room again), which then moves
-- n·T on. Otherwise the call proceeds, and if it books, the pair's tag moves
-- to max(tag, the bucket's time) + ceil(n·T·W/weight · 10^6/s) (in doubles, at most 10^14),
-- W its level's sum counting the pair, s the level's part of the rate in
-- ppm: 10^6 alone, 10^6 - floor for the highest of several active levels,
-- floor(floor / m) for each of the m active levels below it.

local S = nil

-- wfield is the hash field of level l's sum of weights.
local function wfield(l)
  if l == 3 then return "W" end
  return "W" .. l
end

-- pairof is the set's member for tenant at level l; levelof reads it back.
local function pairof(l, tenant)
  if l == 3 then return tenant end
  return "\1" .. l .. tenant
end

local function levelof(m)
  if string.byte(m, 1) == 1 then return tonumber(string.sub(m, 2, 2)) or 3 end
  return 3
end

-- shareload reads the share of a call whose k buckets' arguments start at
-- ARGV[base], if it has one.
local function shareload(k, base)
  if #KEYS % 4 ~= 2 then return end
  local a = base + 6 * k
  S = {
    zkey = KEYS[4 * k + 1], hkey = KEYS[4 * k + 2],
    tenant = ARGV[a], w = tonumber(ARGV[a + 1]), horizon = tonumber(ARGV[a + 2]),
    t = tonumber(ARGV[a + 3]), n = tonumber(ARGV[a + 4]),
    level = tonumber(ARGV[a + 5]) or 3, floor = tonumber(ARGV[a + 6]) or 50000,
    from = now,
  }
  S.at = tonumber(ARGV[a + 7])
  if S.at then
    local c = cooldown({mkey = KEYS[4 * S.at - 1]})
    if c > now then S.from = c end
  end
  S.pair = pairof(S.level, S.tenant)
  local ws = redis.call("HMGET", S.hkey, "W1", "W2", "W", "W4", "W5")
  S.W, S.dirty = {}, {}
  for l = 1, 5 do S.W[l] = tonumber(ws[l]) or 0 end
  local gone = redis.call("ZRANGEBYSCORE", S.zkey, "-inf", now, "LIMIT", 0, 64)
  for _, m in ipairs(gone) do
    local l = levelof(m)
    S.W[l] = S.W[l] - (tonumber(redis.call("HGET", S.hkey, "w:" .. m)) or 0)
    S.dirty[l] = true
    redis.call("HDEL", S.hkey, "w:" .. m, "d:" .. m)
    redis.call("ZREM", S.zkey, m)
  end
  for l = 1, 5 do
    if S.W[l] < 0 then S.W[l] = 0 end
    if S.dirty[l] then redis.call("HSET", S.hkey, wfield(l), fmt(S.W[l])) end
  end
  local tag = tonumber(redis.call("ZSCORE", S.zkey, S.pair))
  S.old = tonumber(redis.call("HGET", S.hkey, "w:" .. S.pair))
  if not tag or tag < S.from then tag = S.from end
  S.tag = tag
end

-- sharerate moves the tags at the rate the shared bucket grants now: an
-- adaptive bucket's effective T (tb.lua) when it is slower than the T the
-- call passed (its ceiling's), so that the horizon is one of the bucket's
-- time however far its rate fell.
local function sharerate(bs)
  if not S or not S.at then return end
  local b = bs[S.at]
  if b and b.adaptive and b.a1 > S.t then S.t = b.a1 end
end

-- sharekeep makes both keys last until at least `till` (µs).
local function sharekeep(till)
  local e = tonumber(redis.call("HGET", S.hkey, "e")) or 0
  if till > e then e = till end
  redis.call("HSET", S.hkey, "e", fmt(e), "W", fmt(S.W[3]))
  redis.call("PEXPIRE", S.hkey, ms(e - now))
  redis.call("PEXPIRE", S.zkey, ms(e - now))
end

-- shareover is the come-back wait (µs) of a pair over its share, having
-- moved its come-back place on; nil if it is within its share.
local function shareover()
  if not S or S.tag - S.from <= S.horizon then return nil end
  local d = tonumber(redis.call("HGET", S.hkey, "d:" .. S.pair)) or 0
  local from = S.tag - S.horizon
  if d < from then d = from end
  redis.call("HSET", S.hkey, "d:" .. S.pair, fmt(d + S.n * S.t))
  sharekeep(d + S.n * S.t)
  return d - now
end

-- sharepart is level l's part of the rate in ppm, l counted active.
local function sharepart(l)
  local top, m = l, 0
  for i = 1, 5 do
    if i ~= l and S.W[i] > 0 then
      m = m + 1
      if i < top then top = i end
    end
  end
  if m == 0 then return 1000000 end
  if l == top then return 1000000 - S.floor end
  return math.floor(S.floor / m)
end

-- sharecommit moves the pair's tag past a booking of n.
local function sharecommit()
  if not S then return end
  local l = S.level
  local W = S.W[l] - (S.old or 0) + S.w
  S.W[l] = W
  local x = S.n * S.t * W / S.w
  local s = sharepart(l)
  if s < 1000000 then x = x * 1000000 / s end
  local step = math.ceil(x)
  if step > 100000000000000 then step = 100000000000000 end
  S.tag = S.tag + step
  redis.call("ZADD", S.zkey, fmt(S.tag), S.pair)
  redis.call("HSET", S.hkey, "w:" .. S.pair, S.w, "f", S.floor)
  if l ~= 3 then redis.call("HSET", S.hkey, wfield(l), fmt(W)) end
  sharekeep(S.tag)
end
